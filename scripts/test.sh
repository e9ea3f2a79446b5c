#!/usr/bin/env bash
# Builds deferkv with its tests and benchmarks and runs the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
cmake --build build -j "$(nproc)"
ctest --test-dir build --output-on-failure --no-tests=error -j "$(nproc)"
