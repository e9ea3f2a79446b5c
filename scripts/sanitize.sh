#!/usr/bin/env bash
# CI's sanitizer jobs (.ci/run runs this after scripts/test.sh):
#   1. AddressSanitizer + UndefinedBehaviorSanitizer (clang, build-sanitize/): the fuzz
#      targets and the whole test suite in one build, then every fuzz target for
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
# The whole suite: each test program run whole, in one shard per core (GoogleTest's
# GTEST_TOTAL_SHARDS), rather than ctest's process per test. A process of this build takes
# 0.12-0.16 s to start and ctest starts ~1250 (the step took 417 s that way, 295 s this way);
# the release suite (scripts/test.sh) still runs every test in a process of its own. The
# programs are the ones CMake's gtest_discover_tests registered with ctest (one
# <program>[1]_include.cmake each), so a new one is not missed; they run in ctest's directory
# with the environment CMakeLists.txt gives ctest's tests (DEFERKV_TEST_PROPERTIES: keep the
# two alike). A shard that outlasts its timeout fails. The layering probes are compile-time
# checks of the include roots, which scripts/test.sh runs: nothing a sanitizer could watch.
asan_suite() {
  local include program shard status=0 pids log programs=()
  for include in build-sanitize/*"[1]_include.cmake"; do
    [ -e "$include" ] || { echo "no test programs registered in build-sanitize" >&2; return 1; }
    program=${include##*/}
    programs+=("${program%"[1]_include.cmake"}")
  done
  for program in "${programs[@]}"; do
    pids=()
    for ((shard = 0; shard < jobs; ++shard)); do
      (cd build-sanitize && GTEST_TOTAL_SHARDS=$jobs GTEST_SHARD_INDEX=$shard OPENBLAS_NUM_THREADS=1 \
        UBSAN_OPTIONS=print_stacktrace=1 timeout 1800 "./$program" --gtest_brief=1 >"$program.$shard.log" 2>&1) &
      pids+=($!)
    done
    for ((shard = 0; shard < jobs; ++shard)); do
      log="build-sanitize/$program.$shard.log"
      if ! wait "${pids[shard]}"; then
        status=1
        cat "$log"
        echo "== $program, shard $shard of $jobs, failed" >&2
      else
        tail -n 2 "$log"
      fi
    done
  done
  return "$status"
}
step asan-tests asan_suite
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
