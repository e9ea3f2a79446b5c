#!/usr/bin/env bash
# Installs the Debian packages (when missing) and builds the deferkv CLI into build/, and
# the Python module into build/python/deferkv when pybind11 is found (only what those
# need). `scripts/build.sh all` builds everything, the tests and benchmarks too, in one
# build, so its cores are kept busy to the end (scripts/test.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
"$(dirname "$0")/install-deps.sh"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DDEFERKV_UNITY_BUILD="${DEFERKV_UNITY_BUILD:-OFF}" \
  -DDEFERKV_PCH="${DEFERKV_PCH:-OFF}" ${DEFERKV_OPENAI_NODE_MODULES:+-DDEFERKV_OPENAI_NODE_MODULES="$DEFERKV_OPENAI_NODE_MODULES"}
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  targets=(deferkv_cli)
  grep -q '^DEFERKV_BUILD_PYTHON:BOOL=ON' build/CMakeCache.txt && targets+=(deferkv_python)
fi
cmake --build build -j "$(nproc)" --target "${targets[@]}"
