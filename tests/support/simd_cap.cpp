// Every test program that links this file honours DEFERKV_MAX_SIMD (kernels/simd_target.h)
// before its first test: scripts/test.sh runs the kernel tests once more capped at AVX2,
// so that the code an AVX2-only CPU dispatches to is run where the kernels' default is
// AVX-512 (and the tests that do not walk every target themselves run it too).
#include <cstdio>
#include <cstdlib>
#include <exception>

#include "kernels/simd_target.h"

namespace {

const bool kCapped = [] {
  try {
    deferkv::cap_simd_target_from_environment();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    std::exit(1);
  }
  return true;
}();

}  // namespace
