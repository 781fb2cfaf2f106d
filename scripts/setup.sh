#!/usr/bin/env bash
# First command of the README: install, build, and run Lily on the small
# model that ships in the repository (models/lily-tiny: the real
# architecture at toy size with random weights, the real Qwen3 tokenizer and
# the Qwen3.6 chat template).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
./build/bin/lily info --model models/lily-tiny
./build/bin/lily run "hello" --max-tokens 32 --seed 1
