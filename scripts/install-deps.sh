#!/usr/bin/env bash
# Installs the Debian 12 packages deferkv needs to build and test; does nothing when
# they are all present already. With --sanitizers, also clang and its runtimes
# (libFuzzer, AddressSanitizer, ThreadSanitizer ...) and LLVM's symbolizer (so reports
# name functions and lines) for scripts/sanitize.sh and scripts/fuzz.sh; the normal build
# does not need them. With --slurm, also Slurm's daemons and clients and munge, for the
# one-node cluster of tests/slurm/run_local_slurm_test.sh. With --aarch64, Debian's cross
# compiler, qemu-user and the arm64 builds of the kernels' libraries (Debian's multiarch,
# which this adds the arm64 architecture to) for scripts/test_aarch64.sh. The options can
# be given together (.ci/run installs all three at once, in the background of the build).
# One run at a time: a second waits for the first (flock), then finds its packages there,
# rather than failing on apt's lock. apt runs without the lock's descriptor (9>&-), so a
# daemon a package's script starts (munge, Slurm's) cannot hold the lock after we exit.
set -euo pipefail
# The lock is opened for reading, so another user's earlier run, which created the file,
# does not stop this one.
lock="${TMPDIR:-/tmp}/deferkv-install-deps.lock"
[ -e "$lock" ] || : >"$lock"
exec 9<"$lock"
flock 9
PACKAGES=(
  build-essential cmake ninja-build pkg-config
  libhwy-dev libopenblas-dev
  libcli11-dev nlohmann-json3-dev libfmt-dev libspdlog-dev
  libpcre2-dev libicu-dev
  libcpp-httplib-dev libssl-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  pybind11-dev python3-dev python3-pytest python3-numpy python3-venv python3-setuptools python3-pip
)
add_arm64=0
for option in "$@"; do
  case "$option" in
    --sanitizers) PACKAGES+=(clang-16 libclang-rt-16-dev llvm-16) ;;
    --slurm) PACKAGES+=(munge slurmctld slurmd slurm-client) ;;
    --aarch64)
      PACKAGES+=(g++-aarch64-linux-gnu qemu-user
                 libhwy-dev:arm64 libopenblas-dev:arm64 libfmt-dev:arm64 libspdlog-dev:arm64 libgtest-dev:arm64
                 libssl-dev:arm64)
      add_arm64=1
      ;;
    *) echo "install-deps.sh: unknown option '$option' (known: --sanitizers, --slurm, --aarch64)" >&2; exit 2 ;;
  esac
done
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
if [ "$add_arm64" -eq 1 ] && ! dpkg --print-foreign-architectures | grep -qx arm64; then
  $SUDO dpkg --add-architecture arm64 9>&-
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq 9>&-
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" 9>&-
