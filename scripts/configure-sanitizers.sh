#!/usr/bin/env bash
# Configures a clang build with sanitizers: `asan` (AddressSanitizer with leak
# detection + UndefinedBehaviorSanitizer, and the libFuzzer harnesses) into
# build-asan, or `tsan` (ThreadSanitizer) into build-tsan.
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:?asan or tsan}" in
  asan) dir=build-asan; flags=(-DLILY_SANITIZE=address,undefined -DLILY_BUILD_FUZZERS=ON) ;;
  tsan) dir=build-tsan; flags=(-DLILY_SANITIZE=thread) ;;
  *) echo "usage: $0 asan|tsan" >&2; exit 2 ;;
esac
# -O1 with line tables: what the sanitizers advise, and a quicker build on two cores.
# A unity build (sources compiled in batches) parses the shared headers once
# a batch instead of once a file: these one-off builds take about half the time.
cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Sanitize -DCMAKE_CXX_FLAGS_SANITIZE="-O1 -gline-tables-only" \
  -DCMAKE_CXX_COMPILER=clang++ -DLILY_BUILD_BENCHMARKS=OFF -DCMAKE_UNITY_BUILD=ON "${flags[@]}"
echo "$dir"
