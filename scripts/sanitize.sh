#!/usr/bin/env bash
# The sanitizer jobs of CI (.ci/run runs them after scripts/test.sh):
#  1. AddressSanitizer + UndefinedBehaviorSanitizer: one build (build-sanitize/) for the
#     whole ctest suite and the fuzz targets, the suite, then each fuzz target for
#     FUZZ_SECONDS (default 10) on its seed corpus (scripts/fuzz.sh);
#  2. ThreadSanitizer (build-tsan/): the thread pool's, the batch engine's and the server's
#     tests, with OpenBLAS kept to the calling thread (below).
# Each step prints its wall time and CPU time (scripts/ci_step.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/ci_step.sh
jobs="$(nproc)"
export DEFERKV_FUZZ_BUILD=build-sanitize

# fuzz.sh configures the build (and installs clang); with 0 seconds it only builds the
# fuzz targets, and the rest of `all` (the CLI and the test programs) follows.
step asan-build-fuzz-targets scripts/fuzz.sh 0
step asan-build-tests cmake --build build-sanitize -j "$jobs"
# The layering probes are compile-time checks of the include roots, which scripts/test.sh
# runs: they execute nothing a sanitizer could watch.
step asan-ctest env UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --test-dir build-sanitize --output-on-failure --no-tests=error -j "$jobs" -E '^Layering\.'
step asan-fuzz scripts/fuzz.sh "${FUZZ_SECONDS:-10}"

step tsan-configure cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++-16 \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only" -DDEFERKV_SANITIZE=thread \
  -DDEFERKV_BUILD_BENCH=OFF -DDEFERKV_BUILD_PYTHON=OFF >/dev/null
step tsan-build cmake --build build-tsan -j "$jobs" \
  --target deferkv_thread_pool_tests deferkv_batch_engine_tests deferkv_server_tests deferkv_cli
# OpenBLAS is not instrumented, so TSan cannot see the synchronisation of its own worker
# threads and would report their accesses to the sgemm's buffers; one thread makes it run
# the sgemm on the caller's, where the library's own threads are all TSan sees.
export OPENBLAS_NUM_THREADS=1 TSAN_OPTIONS="halt_on_error=1"
step tsan-thread-pool build-tsan/deferkv_thread_pool_tests
step tsan-batch-engine build-tsan/deferkv_batch_engine_tests
step tsan-server build-tsan/deferkv_server_tests
