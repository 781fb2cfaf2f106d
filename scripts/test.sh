#!/usr/bin/env bash
# Second command of the README: build and run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
# the OpenAI client the server tests use, pinned by tests/server/package-lock.json
(cd tests/server && npm ci --no-audit --no-fund --loglevel=error)
cd build
ctest --output-on-failure -j"$(nproc)"
