# Cross build for aarch64 with Debian's cross compiler (g++-aarch64-linux-gnu) against the
# arm64 libraries of Debian's multiarch (libhwy-dev:arm64 and the others that
# scripts/install-deps.sh --aarch64 installs, in /usr/lib/aarch64-linux-gnu); programs run
# under qemu-user. Used with DEFERKV_KERNELS_ONLY by scripts/test_aarch64.sh.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
# The arm64 packages' .pc files only, not the host's.
set(ENV{PKG_CONFIG_LIBDIR} /usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig)
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64)
# GCC's note that std::pair arguments are passed as GCC 10.1 changed it to: nothing is
# linked against code from an older GCC here.
set(CMAKE_CXX_FLAGS_INIT "-Wno-psabi")
