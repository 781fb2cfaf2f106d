#!/usr/bin/env bash
# The GPU check, in one call on a machine with an NVIDIA GPU: configures and
# builds Lily with the CUDA backend, runs the backend conformance tests (every
# operation and the whole fixture models against the CPU reference), then the
# rest of the suite, then a short `lily bench --device cuda` on `lily synth`
# models (MLX 4-bit and BF16), and prints a summary table last.
#   scripts/gpu-check.sh [BUILD_DIR]      (LILY_CUDA_ARCH: default 90, Hopper)
# A machine without the PCRE2 and utf8proc headers builds against Debian's
# packages unpacked into .gpu-deps/root (scripts/gpu-deps.sh).
set -uo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-cuda}
jobs=$(nproc)
source scripts/gpu-env.sh
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true

summary=()
failed=0
step() {  # step NAME COMMAND...: runs it, keeps a line for the summary
  local name=$1 start=$SECONDS r=ok
  shift
  echo "== $name"
  "$@" || { r=FAILED; failed=1; }
  summary+=("$(printf '| %-44s | %-6s | %5d s |' "$name" "$r" $((SECONDS - start)))")
  [ $r = ok ]
}

step "configure (CUDA ${LILY_CUDA_ARCH:-90})" cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CUDA_ARCHITECTURES="${LILY_CUDA_ARCH:-90}" -DLILY_BUILD_BENCHMARKS=OFF >/dev/null &&
  step "build" cmake --build "$build" -j"$jobs" -- --quiet &&
  grep -q "LILY_HAVE_CUDA" "$build/compile_commands.json" || { summary+=("| no CUDA backend was built | FAILED |"); failed=1; }
if [ $failed = 0 ]; then
  step "conformance: every op, whole models vs CPU" "$build/bin/lily_tests" --gtest_filter='*Conformance*:*WholeModel*' \
    --gtest_color=no
  step "the rest of the suite (ctest)" bash -c "ctest --test-dir '$build' -j$jobs --output-on-failure \
    -E 'Conformance|WholeModel' >'$build/ctest.log' 2>&1; rc=\$?; grep -E 'tests passed|\*\*\*|Failed  |Failure|The following' \
    '$build/ctest.log' | tail -40; exit \$rc"
  lily=$build/bin/lily
  # the bundled model answering on the GPU: tokens picked on the device, greedy and sampled, bf16 and fp32
  step "run --device cuda (greedy, bf16)" "$lily" run --device cuda --temperature 0 --max-tokens 24 "hello"
  step "run --device cuda (sampled, bf16)" "$lily" run --device cuda --temperature 0.8 --top-p 0.9 --seed 1 \
    --max-tokens 24 "hello"
  step "run --device cuda (greedy, fp32)" "$lily" run --device cuda --float-activations --temperature 0 \
    --max-tokens 24 "hello"
  for fmt in mlx4 bf16; do
    step "synth 4 layers $fmt" "$lily" synth --out "/tmp/lily-synth-$fmt" --layers 4 --format "$fmt" >/dev/null &&
      step "bench --device cuda $fmt" "$lily" bench --model "/tmp/lily-synth-$fmt" --contexts 256,1024 --device cuda \
        --decode-steps 32
  done
fi
echo
echo "| step | result | time |"
echo "|---|---|---:|"
printf '%s\n' "${summary[@]}"
exit $failed
