#!/usr/bin/env bash
# Speculative decoding on a machine with an NVIDIA GPU, in one call: builds
# Lily with the CUDA backend, runs the speculative tests on the GPU (verify
# rows against lone decode steps, rewinds against the kept steps, the MTP
# head against no head) and the GPU conformance tests, then `lily bench
# --device cuda --mtp K` on a 4-layer `lily synth --mtp` checkpoint (bf16,
# the release's layout) for K = 1, 2 and 3: the cost of a verify step over
# K + 1 rows against a plain step, and the speed it implies.
#   scripts/gpu-mtp.sh [BUILD_DIR]      (LILY_CUDA_ARCH: default 90)
set -uo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-cuda}
source scripts/gpu-env.sh
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES="${LILY_CUDA_ARCH:-90}" \
  -DLILY_BUILD_BENCHMARKS=OFF >/dev/null || exit 1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --build "$build" -j"$(nproc)" --target lily lily_tests -- --quiet || exit 1
echo "built at ${SECONDS} s"
lily=$build/bin/lily
"$lily" synth --out "$work/s4-mtp" --layers 4 --format bf16 --mtp >/dev/null &
"$build/bin/lily_tests" --gtest_filter='*Speculative*:*Conformance*cuda*:*WholeModel*cuda*' --gtest_color=no 2>&1 |
  grep -vE '^\[ RUN|^\[       OK' | tail -30
[ "${PIPESTATUS[0]}" = 0 ] || { echo "the GPU tests failed: no benchmark"; exit 1; }
wait
echo "tested at ${SECONDS} s"
for k in 1 2 3; do
  "$lily" bench --model "$work/s4-mtp" --device cuda --contexts 256 --decode-steps 64 --mtp "$k" |
    grep -vE '^\|---|^\| model|^$'
done
echo "done at ${SECONDS} s"
