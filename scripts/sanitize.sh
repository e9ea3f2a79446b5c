#!/usr/bin/env bash
# CI's sanitizer jobs (.ci/run runs this after scripts/test.sh):
#   1. AddressSanitizer + UndefinedBehaviorSanitizer (clang, build-sanitize/): the fuzz
#      targets and the whole ctest suite in one build, then every fuzz target for
#      FUZZ_SECONDS (default 10) on its seed corpus (scripts/fuzz.sh);
#   2. ThreadSanitizer (build-tsan/): the thread pool's, the batch engine's and the server's
#      tests (the server tests also run the CLI's bench-serve under TSan).
# Both builds compile at -O0 but for the code the tests spend their time in (the kernels,
# for this machine's instruction set only, the tokenizer and the model layer at -O1:
# cmake/layers.cmake), which halves their cost. Each step prints its wall and CPU time
# (scripts/ci_step.sh); fuzz/README.md has what each costs on a 2-core machine.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/ci_step.sh
jobs="$(nproc)"
export DEFERKV_FUZZ_BUILD=build-sanitize
export DEFERKV_SANITIZE_OPT=-O0
# llvm-16's symbolizer, so reports name functions and lines (scripts/install-deps.sh --sanitizers).
export PATH="/usr/lib/llvm-16/bin:$PATH"

step asan-build-fuzz-targets scripts/fuzz.sh 0
step asan-build-tests cmake --build build-sanitize -j "$jobs"
# The layering probes are compile-time checks of the include roots, which scripts/test.sh
# runs: they execute nothing a sanitizer could watch.
step asan-ctest env UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --test-dir build-sanitize --output-on-failure --no-tests=error -j "$jobs" -E '^Layering\.'
step asan-fuzz scripts/fuzz.sh "${FUZZ_SECONDS:-10}"

step tsan-configure cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++-16 \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="$DEFERKV_SANITIZE_OPT -gline-tables-only" -DDEFERKV_SANITIZE=thread \
  -DDEFERKV_BUILD_BENCH=OFF -DDEFERKV_BUILD_PYTHON=OFF -DDEFERKV_UNITY_BUILD="${DEFERKV_UNITY_BUILD:-OFF}" \
  -DDEFERKV_PCH="${DEFERKV_PCH:-OFF}" >/dev/null
step tsan-build cmake --build build-tsan -j "$jobs" \
  --target deferkv_thread_pool_tests deferkv_batch_engine_tests deferkv_server_tests deferkv_cli
# OpenBLAS is not instrumented, so TSan cannot see the synchronisation of its own worker
# threads and would report their accesses to the sgemm's buffers; one thread makes it run
# the sgemm on the caller's, where the library's own threads are all TSan sees. The same
# holds for cpp-httplib: scripts/tsan_suppressions.txt says what is set aside and why.
export OPENBLAS_NUM_THREADS=1 TSAN_OPTIONS="halt_on_error=1 suppressions=$PWD/scripts/tsan_suppressions.txt"
# The three programs at once (the server's mostly waits on its sockets); each one's output
# is printed when it ends, and any failure fails the step.
tsan_tests() {
  local pids=() status=0 name
  for name in thread_pool batch_engine server; do
    build-tsan/deferkv_${name}_tests >"build-tsan/${name}.log" 2>&1 &
    pids+=($!)
  done
  for name in thread_pool batch_engine server; do
    wait "${pids[0]}" || { status=1; echo "== deferkv_${name}_tests failed" >&2; }
    pids=("${pids[@]:1}")
    cat "build-tsan/${name}.log"
  done
  return "$status"
}
step tsan-tests tsan_tests
