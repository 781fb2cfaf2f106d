#!/usr/bin/env bash
# The suite again under sanitizers (clang): everything with AddressSanitizer
# (leaks detected) + UndefinedBehaviorSanitizer, and the scheduler, batching
# and server tests with ThreadSanitizer. Called by scripts/test.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs="$(nproc)"
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1" UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1"

bash scripts/configure-sanitizers.sh asan >/dev/null
cmake --build build-asan -j"$jobs" --target lily lily_tests lily_server_tests
# The Node clients' cases (the web page's included) and the soak repeat what the hardening test does
# to the server at several times the cost here: they run natively. So do the
# conformance cases of the CPU's higher ISA levels (AVX2's ops, float and
# int8, cover the same code around their kernels) and the whole-model ones
# (BatchDecode runs the same forward pass here); the GPU's skip anyway. The
# token picks of the int8 candidates are the float ones' (int8 changes no
# pick), and the concurrent-streams run is ThreadSanitizer's to check. The
# trained model's hundreds of held-out generations repeat one forward pass
# that its greedy-token case runs here too.
(cd build-asan && ctest --output-on-failure -j"$jobs" \
   -E 'Server\..*NodeClient|Server.WebChat|Server.Soak|Conformance\..*/(cpu_avx512|cpu_amx|cuda)|WholeModel\.|TokenPicksAgree/.*_int8|SchedulerTest\.ConcurrentStreams|TrainedModel\.(Answers|Quantized)')

bash scripts/configure-sanitizers.sh tsan >/dev/null
cmake --build build-tsan -j"$jobs" --target lily lily_tests
# ThreadSanitizer maps fixed address ranges: run with the address space laid
# out as it expects. Its build holds the tests of the parts that run threads
# together (tests/CMakeLists.txt); of the server's, the hardening and curl ones.
(cd build-tsan && setarch "$(uname -m)" -R ctest --output-on-failure -j"$jobs" \
   -R 'Scheduler|BatchDecode|Session|ThreadPool|Server.HttpHardening|Server.Curl')
