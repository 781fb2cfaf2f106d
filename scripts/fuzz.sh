#!/usr/bin/env bash
# Builds the libFuzzer harnesses (clang, AddressSanitizer + UndefinedBehaviorSanitizer)
# into build-asan and runs each for SECONDS (default 20) from its committed seed
# corpus. New inputs go to a scratch corpus, so the committed seeds stay as they
# are; a crash leaves its input in build-asan/fuzz-findings and fails the run.
#   scripts/fuzz.sh [SECONDS] [TARGET...]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-20}"; shift || true
bash scripts/configure-sanitizers.sh asan >/dev/null
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(safetensors_header shard_index config tokenizer_json tokenize chat_template
                                     api_request output_parser json_prefix http_request)
cmake --build build-asan -j"$(nproc)" --target $(printf 'fuzz_%s ' "${targets[@]}") >/dev/null
findings=build-asan/fuzz-findings; mkdir -p "$findings"
export ASAN_OPTIONS="detect_leaks=1:allocator_may_return_null=1" UBSAN_OPTIONS="print_stacktrace=1"
failed=0
printf '%-20s %10s %8s %s\n' target executions corpus result
for t in "${targets[@]}"; do
  work=$(mktemp -d); cp -r "tests/fuzz/corpus/$t/." "$work/"
  log="$findings/$t.log"
  if build-asan/bin/fuzz_"$t" "$work" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=4096 -max_len=65536 \
       -artifact_prefix="$findings/$t-" -print_final_stats=1 >"$log" 2>&1; then result=ok; else result=FAILED; failed=1; fi
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  printf '%-20s %10s %8s %s\n' "$t" "${runs:-?}" "$(ls "$work" | wc -l)" "$result"
  [ "$result" = ok ] || tail -n 40 "$log"
  rm -rf "$work"
done
exit $failed
