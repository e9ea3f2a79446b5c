#!/usr/bin/env bash
# Builds deferkv with its tests and benchmarks and runs the whole test suite: the C++
# tests (ctest, with the official openai npm client against the server; the kernel tests once more capped at AVX2), the Slurm job array on a local one-node cluster (tests/slurm), then the
# Python module's tests (pytest, on build/python), then `pip install .` into a fresh virtual
# environment (scripts/test_install.sh). Each step prints its wall time and CPU
# time (scripts/ci_step.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/ci_step.sh
# The official OpenAI client (npm's `openai`, pinned) for the server's client test
# (ctest openai_npm_contexts); not a Debian package: npm installs it into build/npm.
export DEFERKV_OPENAI_NODE_MODULES="$PWD/build/npm/node_modules"
step openai-npm npm install --prefix build/npm --no-save --no-audit --no-fund --loglevel=error openai@6.49.0
step build scripts/build.sh all
step ctest ctest --test-dir build --output-on-failure --no-tests=error -j "$(nproc)"
# The kernel tests again with dispatch capped at AVX2 (kernels/simd_target.h), so that an
# AVX-512 machine also runs what dispatch picks on a CPU without it.
step kernels-avx2 env DEFERKV_MAX_SIMD=avx2 build/deferkv_kernel_tests --gtest_brief=1
# The Slurm job array on a one-node cluster of this machine (root only: it exits 77, skipped,
# otherwise).
slurm_status=0
step slurm tests/slurm/run_local_slurm_test.sh build/deferkv || slurm_status=$?
if [ "$slurm_status" -ne 0 ] && [ "$slurm_status" -ne 77 ]; then exit "$slurm_status"; fi
# Debian's interpreter, where python3-pytest is installed.
PYTHON=${DEFERKV_PYTHON:-/usr/bin/python3}
status=0
PYTHONPATH=build/python PYTHONDONTWRITEBYTECODE=1 step pytest "$PYTHON" -m pytest -q -p no:cacheprovider tests/python || status=$?
# pytest exits 5 when it collected no test: that is a failure here too.
if [ "$status" -eq 5 ]; then echo "pytest collected no tests" >&2; fi
# pip install of the module into a fresh virtual environment, reusing the build above.
step install scripts/test_install.sh || status=$?
exit "$status"
