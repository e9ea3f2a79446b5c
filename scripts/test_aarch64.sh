#!/usr/bin/env bash
# The SIMD kernels built for aarch64 with Debian's cross compiler and their tests run under
# qemu-user (correctness, not speed), so that an ARM laptop or server gets kernels that ran:
# the base, tensor and kernels layers and the kernel test program only
# (DEFERKV_KERNELS_ONLY, cmake/aarch64-linux-gnu.cmake) in build-aarch64/. The tests walk
# every target the kernels are built for there (NEON and the fallback; not SVE yet:
# src/kernels/hwy_targets.h says why); the tests that do not walk them run what dispatch
# picks (NEON).
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
# qemu-user's default CPU ("max") has every aarch64 extension; the interpreter and the arm64
# libraries are Debian's multiarch ones, found where the program names them.
step aarch64-tests qemu-aarch64-static "$build/deferkv_kernel_tests" --gtest_brief=1
