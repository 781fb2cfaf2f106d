#!/usr/bin/env bash
# First command of the README: install, build, and run Lily on the small
# model that ships in the repository.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
model=tests/data/models/tiny-a-release
./build/bin/lily info --model "$model"
echo "greedy continuation of 1,2,3,4,5:"
./build/bin/lily generate --model "$model" --tokens 1,2,3,4,5 --max-tokens 16
