#!/usr/bin/env bash
# Installs the Debian 12 packages deferkv needs to build and test; does nothing when
# they are all present already. With --sanitizers, also clang and its runtimes
# (libFuzzer, AddressSanitizer, ThreadSanitizer ...) and LLVM's symbolizer (so reports
# name functions and lines) for scripts/sanitize.sh and scripts/fuzz.sh; the normal build
# does not need them. With --slurm, also Slurm's daemons and clients and munge, for the
# one-node cluster of tests/slurm/run_local_slurm_test.sh.
set -euo pipefail
PACKAGES=(
  build-essential cmake ninja-build pkg-config
  libhwy-dev libopenblas-dev
  libcli11-dev nlohmann-json3-dev libfmt-dev libspdlog-dev
  libpcre2-dev libicu-dev
  libcpp-httplib-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  pybind11-dev python3-dev python3-pytest python3-numpy python3-venv python3-setuptools python3-pip
)
case "${1:-}" in
  --sanitizers) PACKAGES+=(clang-16 libclang-rt-16-dev llvm-16) ;;
  --slurm) PACKAGES+=(munge slurmctld slurmd slurm-client) ;;
esac
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
