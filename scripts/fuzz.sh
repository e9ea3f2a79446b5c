#!/usr/bin/env bash
# Builds the libFuzzer targets of fuzz/ (clang, AddressSanitizer + UndefinedBehavior-
# Sanitizer) and runs each for SECONDS (default 60) on its seed corpus fuzz/corpus/<target>/.
#   scripts/fuzz.sh [seconds-per-target] [target ...]     (targets: gguf, fuzz_gguf, ...)
# 0 seconds: build only. The build folder is build-fuzz (DEFERKV_FUZZ_BUILD overrides it;
# scripts/sanitize.sh shares its own, where the test suite is built too). New inputs go to
# <build>/corpus/<target>/, never into the repository; a finding is written to
# <build>/findings/ and makes the script fail. Memory is capped (-rss_limit_mb,
# -malloc_limit_mb), so an input that makes a reader allocate far more than its own size
# is a finding too. Runs FUZZ_JOBS targets at once (default: the cores) and prints
# executions per target at the end. DEFERKV_SANITIZE_OPT is the optimisation of everything
# but the kernels (default -O1, for speed in long runs; scripts/sanitize.sh builds at -O0,
# which compiles 2.5x faster). FUZZ_RUNS=N stops each target after N executions (within
# its SECONDS): fuzz/README.md records runs of one million executions a target.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}"
shift || true
build="${DEFERKV_FUZZ_BUILD:-build-fuzz}"

scripts/install-deps.sh --sanitizers
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_COMPILER=clang++-16 -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="${DEFERKV_SANITIZE_OPT:--O1} -gline-tables-only" \
  -DDEFERKV_SANITIZE=address,undefined -DDEFERKV_FUZZ=ON -DDEFERKV_BUILD_BENCH=OFF -DDEFERKV_BUILD_PYTHON=OFF \
  -DDEFERKV_UNITY_BUILD="${DEFERKV_UNITY_BUILD:-OFF}" -DDEFERKV_PCH="${DEFERKV_PCH:-OFF}" >/dev/null

targets=()
for name in "$@"; do targets+=("fuzz_${name#fuzz_}"); done
if [ ${#targets[@]} -eq 0 ]; then
  for source in fuzz/fuzz_*.cpp; do targets+=("$(basename "$source" .cpp)"); done
fi
cmake --build "$build" -j "$(nproc)" --target "${targets[@]}"
[ "$seconds" -gt 0 ] || exit 0

# The largest input a target starts from (its corpus's largest file) caps -max_len;
# 256 MiB of allocation at once, or 2 GiB resident, is far beyond what any input of
# that size needs.
export PATH="/usr/lib/llvm-16/bin:$PATH"  # its symbolizer names functions in reports
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1}"
mkdir -p "$build/findings"
# One target's run; its one-line result goes to <build>/findings/<target>.result.
fuzz_target() {
  local target=$1 log="$build/findings/$1.log" status=ok execs
  mkdir -p "$build/corpus/$target"
  if ! "$build/$target" -max_total_time="$seconds" ${FUZZ_RUNS:+-runs="$FUZZ_RUNS"} -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=256 \
       -print_final_stats=1 -artifact_prefix="$build/findings/$target-" \
       "$build/corpus/$target" "fuzz/corpus/${target#fuzz_}" </dev/null >"$log" 2>&1; then
    status="FINDING (see $log)"
    tail -40 "$log"
  fi
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  printf '%-26s %12s execs  %s\n' "$target" "${execs:-?}" "$status" >"$build/findings/$target.result"
}
# Each fuzzer runs on one core: FUZZ_JOBS of them at once (default: the cores).
parallel=${FUZZ_JOBS:-$(nproc)}
for target in "${targets[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$parallel" ]; do wait -n || true; done
  fuzz_target "$target" &
done
wait
failed=0
for target in "${targets[@]}"; do
  cat "$build/findings/$target.result"
  grep -q ' ok$' "$build/findings/$target.result" || failed=1
done
exit "$failed"
