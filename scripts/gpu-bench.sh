#!/usr/bin/env bash
# The GPU measurements in one call on a machine with an NVIDIA GPU, for
# docs/PERFORMANCE.md: builds `lily` and the tests with the CUDA backend,
# runs the GPU conformance tests (a figure of a wrong kernel is no figure),
# then `lily bench --device cuda` on `lily synth` checkpoints of the real
# shapes: 4 layers in MLX 4-bit and bf16 (contexts 256 and 4,096), and the
# full 40 layers in MLX 4-bit (context 256) while the time limit allows.
#   scripts/gpu-bench.sh [BUILD_DIR]     (LILY_CUDA_ARCH: default 90; LILY_GPU_BENCH_BUDGET_S: 380)
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
cmake --build "$build" -j"$(nproc)" --target lily lily_tests -- --quiet || exit 1
echo "built at ${SECONDS} s"
lily=$build/bin/lily
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(for f in mlx4 bf16; do "$lily" synth --out "$work/s4-$f" --layers 4 --format "$f" >/dev/null; done) &
"$build/bin/lily_tests" --gtest_filter='*Conformance*cuda*:*WholeModel*cuda*' --gtest_color=no 2>&1 |
  grep -vE '^\[ RUN|^\[       OK' | tail -40
[ "${PIPESTATUS[0]}" = 0 ] || { echo "the GPU conformance tests failed: no benchmark"; exit 1; }
wait
echo "tested at ${SECONDS} s"
# each model with decode steps replayed from their recording, then queued op by op
bench() {
  for graphs in "" --no-step-graphs; do
    echo "-- lily bench $* $graphs"
    "$lily" bench "$@" --device cuda --decode-steps 64 $graphs 2>&1 | grep -E '^[|]|bandwidth|decode step'
  done
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
