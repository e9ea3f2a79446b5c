// DEFERKV_MAX_SIMD's cap (kernels/simd_target.h): dispatch stays at or below the named
// instruction set, and the tests' own forcing of a target (for_each_simd_target) skips the
// ones above it, so a capped run runs what a narrower CPU gets.
#include "kernels/simd_target.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

// clang-format off
#include "kernels/hwy_targets.h"
#include <hwy/targets.h>
// clang-format on

namespace deferkv {
namespace {

// Undoes a cap (each call of hwy::DisableTargets replaces the last): none, then
// DEFERKV_MAX_SIMD's again when the run was started capped.
void restore_cap() {
  hwy::DisableTargets(0);
  cap_simd_target_from_environment();
}

// The best of `targets` that the CPU has (`uncapped`) and the kernels are built for, by
// Highway's order (the lowest bit is the best); the static target when there is none (on
// aarch64 the fallback is NEON itself). Highway never disables the kernels' static target
// (their compiler may use its instructions anywhere), so a cap below it keeps it: that
// matters in the sanitizer builds, which compile the kernels for the static target only
// under -march=native (cmake/layers.cmake), hence the kernels' own targets, not this file's
// HWY_TARGETS and HWY_STATIC_TARGET.
std::string best_of(int64_t uncapped, int64_t targets) {
  const int64_t t = uncapped & built_simd_targets() & (targets | static_simd_target());
  return hwy::TargetName(t == 0 ? static_simd_target() : t & -t);  // none: dispatch's fallback
}

TEST(SimdTarget, CapKeepsDispatchAtOrBelowTheNamedSet) {
  hwy::DisableTargets(0);
  const int64_t uncapped = hwy::SupportedTargets();
  const int64_t portable = HWY_SCALAR | HWY_EMU128;
#if HWY_ARCH_X86
  cap_simd_target("AVX2");
  EXPECT_EQ(simd_target_name(), best_of(uncapped, HWY_AVX2 | portable));
  EXPECT_EQ(hwy::SupportedTargets() & (HWY_AVX3 | HWY_AVX3_DL), 0);
  EXPECT_EQ(hwy::SupportedTargets() & HWY_AVX2, uncapped & HWY_AVX2);
  cap_simd_target("avx3");
  EXPECT_EQ(simd_target_name(), best_of(uncapped, HWY_AVX3 | HWY_AVX2 | portable));
#elif HWY_ARCH_ARM_A64
  cap_simd_target("neon");
  EXPECT_EQ(simd_target_name(), best_of(uncapped, HWY_NEON | portable));
  EXPECT_EQ(hwy::SupportedTargets() & (HWY_SVE | HWY_SVE2 | HWY_SVE_256 | HWY_SVE2_128), 0);
  cap_simd_target("sve");
  EXPECT_EQ(simd_target_name(), best_of(uncapped, HWY_SVE | HWY_SVE_256 | HWY_NEON | portable));
  EXPECT_EQ(hwy::SupportedTargets() & (HWY_SVE2 | HWY_SVE2_128), 0);
  cap_simd_target("sve2");
  EXPECT_EQ(simd_target_name(),
            best_of(uncapped, HWY_SVE2 | HWY_SVE2_128 | HWY_SVE | HWY_SVE_256 | HWY_NEON | portable));
#endif
  cap_simd_target("scalar");
  EXPECT_EQ(simd_target_name(), best_of(uncapped, portable));
  restore_cap();
  RecordProperty("uncapped_targets", std::to_string(uncapped));
}

TEST(SimdTarget, UnknownNameIsAnErrorNamingTheKnownOnes) {
  try {
    cap_simd_target("avx1024");
    ADD_FAILURE() << "no error";
  } catch (const std::exception& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("DEFERKV_MAX_SIMD='avx1024'"), std::string::npos) << message;
    EXPECT_NE(message.find("scalar"), std::string::npos) << message;
  }
  restore_cap();
}

}  // namespace
}  // namespace deferkv
