#!/usr/bin/env bash
# The SIMD kernels built for aarch64 with Debian's cross compiler and their tests run under
# qemu-user (correctness, not speed), so that an ARM laptop or server gets kernels that ran:
# the base, tensor and kernels layers and the kernel test program only
# (DEFERKV_KERNELS_ONLY, cmake/aarch64-linux-gnu.cmake) in build-aarch64/. The tests walk
# every target the kernels are built for there that the CPU runs (src/kernels/hwy_targets.h:
# NEON, also the fallback, SVE and SVE2, and SVE_256 or SVE2_128 at their vector length); the
# tests that do not walk them run what dispatch picks. SVE code must work at any vector
# length, so the tests run at three: 16 bytes (the least, and SVE2_128's), 32 (SVE_256's)
# and 256 (the most); the two wider ones leave out the slowest test under qemu (Matmul's
# every type and token count, about 40% of such a run), whose kernels other tests cover.
# Each step prints its wall and CPU time (scripts/ci_step.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/ci_step.sh
scripts/install-deps.sh --aarch64
build=build-aarch64
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
step aarch64-configure cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake -DDEFERKV_KERNELS_ONLY=ON "${launcher[@]}" >/dev/null
step aarch64-build cmake --build "$build" -j "$(nproc)" --target deferkv_kernel_tests
# qemu-user's CPU "max" has every aarch64 extension; the interpreter and the arm64 libraries
# are Debian's multiarch ones, found where the program names them. qemu runs a program on one
# core, so the runs go in two lanes, the 32-byte one (the longest, ~85 s alone) beside the
# other two (~50 and ~35 s); each run's output is printed when all end, with its wall time.
run_tests() {
  local bytes=$1 start=$SECONDS status=0
  shift
  qemu-aarch64 -cpu "max,sve-default-vector-length=$bytes" "$build/deferkv_kernel_tests" \
    --gtest_brief=1 "$@" >"$build/tests-$bytes.log" 2>&1 || status=$?
  echo "== aarch64 tests at $bytes-byte SVE vectors: $((SECONDS - start)) s wall, exit status $status" \
    >>"$build/tests-$bytes.log"
  return "$status"
}
all_tests() {
  local skip=--gtest_filter=-Matmul.MatchesReferenceForEveryTypeAndTokenCount status=0 lane
  run_tests 32 "$skip" &
  lane=$!
  run_tests 16 || status=1
  run_tests 256 "$skip" || status=1
  wait "$lane" || status=1
  cat "$build"/tests-{16,32,256}.log
  return "$status"
}
step aarch64-tests all_tests
