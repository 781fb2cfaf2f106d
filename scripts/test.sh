#!/usr/bin/env bash
# Second command of the README: build and run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
# the OpenAI client the server tests use, pinned by tests/server/package-lock.json
(cd tests/server && npm ci --no-audit --no-fund --loglevel=error)
cd build
ctest --output-on-failure -j"$(nproc)"
cd ..
# The suite under sanitizers, and each fuzz harness for a short time;
# LILY_SKIP_SANITIZERS=1 skips both.
if [ "${LILY_SKIP_SANITIZERS:-0}" != 1 ]; then
  bash scripts/test-sanitizers.sh
  bash scripts/fuzz.sh 4
fi
# The same suite for 64-bit Arm (the CPU path of Apple Silicon and Arm
# servers), cross-built and run under qemu-user; LILY_SKIP_AARCH64=1 skips it.
if [ "${LILY_SKIP_AARCH64:-0}" != 1 ]; then
  bash scripts/test-aarch64.sh
fi
