#!/usr/bin/env bash
# Builds deferkv with its tests and benchmarks and runs the whole test suite: the C++
# tests (ctest), then the Python module's (pytest, on build/python).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
cmake --build build -j "$(nproc)"
ctest --test-dir build --output-on-failure --no-tests=error -j "$(nproc)"
# Debian's interpreter, where python3-pytest is installed.
PYTHON=${DEFERKV_PYTHON:-/usr/bin/python3}
status=0
PYTHONPATH=build/python PYTHONDONTWRITEBYTECODE=1 "$PYTHON" -m pytest -q -p no:cacheprovider tests/python || status=$?
# pytest exits 5 when it collected no test: that is a failure here too.
if [ "$status" -eq 5 ]; then echo "pytest collected no tests" >&2; fi
exit "$status"
