#!/usr/bin/env bash
# The sanitizer jobs of CI (.ci/run runs them after scripts/test.sh):
#  1. each fuzz target for FUZZ_SECONDS (default 15) on its seed corpus, under
#     AddressSanitizer + UndefinedBehaviorSanitizer (scripts/fuzz.sh, build-sanitize/);
#  2. the thread pool tests under ThreadSanitizer (build-tsan/, the pool alone: the
#     library's other threads are OpenBLAS's, which TSan cannot see into).
set -euo pipefail
cd "$(dirname "$0")/.."
jobs="$(nproc)"

DEFERKV_FUZZ_BUILD=build-sanitize scripts/fuzz.sh "${FUZZ_SECONDS:-15}"

cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++-16 \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only" -DDEFERKV_SANITIZE=thread \
  -DDEFERKV_BUILD_BENCH=OFF >/dev/null
cmake --build build-tsan -j "$jobs" --target deferkv_thread_pool_tests
TSAN_OPTIONS="halt_on_error=1" build-tsan/deferkv_thread_pool_tests
