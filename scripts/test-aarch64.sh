#!/usr/bin/env bash
# Builds Lily for aarch64 with Debian's cross toolchain and runs the test
# suite under qemu-user: the CPU backend's portable (NEON) path is tested on
# every change, not only the x86 one, and so are the Arm int8 kernels
# (neon_int8): qemu-user's default CPU has DotProd and I8MM.
set -euo pipefail
cd "$(dirname "$0")/.."
SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
need=(g++-aarch64-linux-gnu qemu-user libpcre2-dev:arm64 libutf8proc-dev:arm64 libgtest-dev:arm64 libgmock-dev:arm64)
missing=()
for p in "${need[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  dpkg --print-foreign-architectures | grep -qx arm64 || $SUDO dpkg --add-architecture arm64
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}"
fi
# Static binaries: under qemu-user (Debian 12's 7.2) a dynamically linked
# glibc hangs in pthread_create, and the CPU backend starts threads.
# A unity build, as for the sanitizer builds: one-off, so batching the sources pays.
cmake -S . -B build-aarch64 -DCMAKE_BUILD_TYPE=Release -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake \
  -DLILY_BUILD_BENCHMARKS=OFF -DLILY_BUILD_SERVER=OFF -DLILY_STATIC=ON -DCMAKE_UNITY_BUILD=ON >/dev/null
cmake --build build-aarch64 -j"$(nproc)"
cd build-aarch64
# The pseudo-terminal test execs the binary directly, which needs a binfmt handler for aarch64.
# The conformance cases run the Arm int8 kernels (SDOT, and I8MM: qemu-user's
# default CPU has both) against the portable reference; the GPU's cases would
# only start and skip, this build having no GPU. The GGUF tokenizer's
# comparison builds a 150k-token vocabulary twice: its code has no
# architecture-specific part, and it runs natively.
# The trained model's held-out answers and quantized copies are hundreds of
# generations; under emulation its greedy tokens against transformers' stand for them.
ctest --output-on-failure -j"$(nproc)" -E 'CtrlC|Conformance\..*/cuda|WholeModel\.|GgufModel\.TheMetadataTokenizer|TrainedModel\.(Answers|Quantized)'
