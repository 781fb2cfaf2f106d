#!/usr/bin/env bash
# The GPU measurements in one call on a machine with an NVIDIA GPU, for
# docs/PERFORMANCE.md: builds `lily` and the tests with the CUDA backend,
# runs the GPU conformance tests (a figure of a wrong kernel is no figure),
# then `lily bench --device cuda` on `lily synth` checkpoints of the real
# shapes: 4 layers in MLX 4-bit and bf16 (contexts 256 and 4,096), and the
# full 40 layers in MLX 4-bit (context 256) while the time limit allows.
#   scripts/gpu-bench.sh [BUILD_DIR]     (LILY_CUDA_ARCH: default 90; LILY_GPU_BENCH_BUDGET_S: 380)
# With LILY_BASELINE_TAR=FILE (a `git archive` of the commit to compare
# with), that tree's `lily` is built beside this one and the two are benched
# in alternating rounds on the same checkpoints (LILY_GPU_BENCH_ROUNDS: 2).
# Without the PCRE2 and utf8proc headers it builds against .gpu-deps/root
# (scripts/gpu-deps.sh).
set -uo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-cuda}
budget=${LILY_GPU_BENCH_BUDGET_S:-380}
source scripts/gpu-env.sh
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES="${LILY_CUDA_ARCH:-90}" \
  -DLILY_BUILD_BENCHMARKS=OFF >/dev/null || exit 1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
base=""
if [ -n "${LILY_BASELINE_TAR:-}" ]; then
  mkdir -p "$work/base-src" && tar -xf "$LILY_BASELINE_TAR" -C "$work/base-src" || exit 1
  (cd "$work/base-src" && cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES="${LILY_CUDA_ARCH:-90}" \
    -DLILY_BUILD_BENCHMARKS=OFF -DLILY_BUILD_TESTS=OFF >/dev/null && cmake --build build -j"$(($(nproc) / 2))" --target lily -- --quiet) \
    >"$work/base-build.log" 2>&1 &
  base=$work/base-src/build/bin/lily
fi
cmake --build "$build" -j"$(nproc)" --target lily lily_tests -- --quiet || exit 1
wait
if [ -n "$base" ] && [ ! -x "$base" ]; then tail -20 "$work/base-build.log"; echo "the baseline did not build"; exit 1; fi
echo "built at ${SECONDS} s"
lily=$build/bin/lily
(for f in mlx4 bf16; do "$lily" synth --out "$work/s4-$f" --layers 4 --format "$f" >/dev/null; done) &
"$build/bin/lily_tests" --gtest_filter='*Conformance*cuda*:*WholeModel*cuda*' --gtest_color=no 2>&1 |
  grep -vE '^\[ RUN|^\[       OK' | tail -40
[ "${PIPESTATUS[0]}" = 0 ] || { echo "the GPU conformance tests failed: no benchmark"; exit 1; }
wait
echo "tested at ${SECONDS} s"
# each model with decode steps replayed from their recording (against the
# baseline, in alternating rounds, where there is one), then queued op by op
bench() {
  local rounds=1
  [ -n "$base" ] && rounds=${LILY_GPU_BENCH_ROUNDS:-2}
  for ((i = 1; i <= rounds; ++i)); do
    for bin in $base "$lily"; do
      echo "-- $([ "$bin" = "$base" ] && echo baseline || echo this tree) round $i: lily bench $*"
      "$bin" bench "$@" --device cuda --decode-steps 64 2>&1 | grep -E '^[|]|bandwidth|decode step'
    done
  done
  echo "-- this tree: lily bench $* --no-step-graphs"
  "$lily" bench "$@" --device cuda --decode-steps 64 --no-step-graphs 2>&1 | grep -E '^[|]|bandwidth|decode step'
}
for f in mlx4 bf16; do
  echo "== 4 layers, $f"
  bench --model "$work/s4-$f" --contexts 256,4096
  rm -rf "$work/s4-$f"
done
if [ "$SECONDS" -lt "$budget" ]; then
  echo "== 40 layers, mlx4"
  "$lily" synth --out "$work/s40" --layers 40 --format mlx4 >/dev/null && bench --model "$work/s40" --contexts 256
fi
echo "done at ${SECONDS} s"
