#!/usr/bin/env bash
# Installs the Debian packages (when missing) and builds the deferkv CLI into build/
# (only what the CLI needs: scripts/test.sh builds the tests and benchmarks).
set -euo pipefail
cd "$(dirname "$0")/.."
"$(dirname "$0")/install-deps.sh"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build build -j "$(nproc)" --target deferkv_cli
