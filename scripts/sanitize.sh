#!/usr/bin/env bash
# The sanitizer jobs. Two scopes:
#   scripts/sanitize.sh          CI's (.ci/run runs it after scripts/test.sh): every fuzz
#                                target for FUZZ_SECONDS (default 10) on its seed corpus
#                                under AddressSanitizer + UndefinedBehaviorSanitizer
#                                (scripts/fuzz.sh, build-sanitize/), and the thread pool's
#                                tests under ThreadSanitizer (build-tsan/).
#   scripts/sanitize.sh --full   also the whole ctest suite in that ASan+UBSan build, and
#                                the batch engine's and the server's tests under TSan.
# The full scope is not CI's yet: it costs about three Release builds on a 2-core machine
# (an ASan+UBSan build is ~2x a Release one in CPU, TSan ~1x) and has not yet run to the end
# on one; it joins CI once a run shows it green and its cost (docs: fuzz/README.md).
# Each step prints its wall time and CPU time (scripts/ci_step.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/ci_step.sh
full=0
[ "${1:-}" = "--full" ] && full=1
jobs="$(nproc)"
export DEFERKV_FUZZ_BUILD=build-sanitize

step asan-build-fuzz-targets scripts/fuzz.sh 0
if [ "$full" -eq 1 ]; then
  step asan-build-tests cmake --build build-sanitize -j "$jobs"
  # The layering probes are compile-time checks of the include roots, which scripts/test.sh
  # runs: they execute nothing a sanitizer could watch.
  step asan-ctest env UBSAN_OPTIONS=print_stacktrace=1 \
    ctest --test-dir build-sanitize --output-on-failure --no-tests=error -j "$jobs" -E '^Layering\.'
fi
step asan-fuzz scripts/fuzz.sh "${FUZZ_SECONDS:-10}"

tsan_targets=(deferkv_thread_pool_tests)
[ "$full" -eq 1 ] && tsan_targets+=(deferkv_batch_engine_tests deferkv_server_tests deferkv_cli)
step tsan-configure cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++-16 \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only" -DDEFERKV_SANITIZE=thread \
  -DDEFERKV_BUILD_BENCH=OFF -DDEFERKV_BUILD_PYTHON=OFF >/dev/null
step tsan-build cmake --build build-tsan -j "$jobs" --target "${tsan_targets[@]}"
# OpenBLAS is not instrumented, so TSan cannot see the synchronisation of its own worker
# threads and would report their accesses to the sgemm's buffers; one thread makes it run
# the sgemm on the caller's, where the library's own threads are all TSan sees.
export OPENBLAS_NUM_THREADS=1 TSAN_OPTIONS="halt_on_error=1"
step tsan-thread-pool build-tsan/deferkv_thread_pool_tests
if [ "$full" -eq 1 ]; then
  step tsan-batch-engine build-tsan/deferkv_batch_engine_tests
  step tsan-server build-tsan/deferkv_server_tests
fi
