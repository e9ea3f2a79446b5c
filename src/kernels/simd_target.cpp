#include "kernels/simd_target.h"

#include <array>
#include <cstdint>
#include <cstdlib>

// The kernels' own target list, so that HWY_TARGETS here is theirs.
#include "kernels/hwy_targets.h"
// clang-format off
#include <hwy/targets.h>
// clang-format on

#include "base/setting.h"

namespace deferkv {
namespace {

// Every cap names the targets it allows, so that the wider targets of a newer Highway
// (AVX3_ZEN4, AVX3_SPR) stay out under any cap. SSE2 is a target of its own there.
#ifdef HWY_SSE2
constexpr int64_t kSse2 = HWY_SSE2;
#else
constexpr int64_t kSse2 = 0;
#endif

// Each cap's value: the targets dispatch may still pick.
using Cap = SettingName<int64_t>;

constexpr int64_t kPortable = HWY_SCALAR | HWY_EMU128;
#if HWY_ARCH_X86
constexpr int64_t kUpToAvx2 = kPortable | kSse2 | HWY_SSSE3 | HWY_SSE4 | HWY_AVX2;
constexpr std::array<Cap, 4> kCaps = {{
    {"scalar", kPortable},
    {"avx2", kUpToAvx2},
    {"avx3", kUpToAvx2 | HWY_AVX3},
    {"avx3_dl", kUpToAvx2 | HWY_AVX3 | HWY_AVX3_DL},
}};
#elif HWY_ARCH_ARM_A64
constexpr std::array<Cap, 4> kCaps = {{
    {"scalar", kPortable},
    {"neon", kPortable | HWY_NEON},
    {"sve", kPortable | HWY_NEON | HWY_SVE | HWY_SVE_256},
    {"sve2", kPortable | HWY_NEON | HWY_SVE | HWY_SVE_256 | HWY_SVE2 | HWY_SVE2_128},
}};
#else
constexpr std::array<Cap, 1> kCaps = {{{"scalar", kPortable}}};
#endif

}  // namespace

void cap_simd_target(const std::string& name) {
  const int64_t allowed =
      parse_setting<int64_t>(kMaxSimdVariable, name, "an instruction set this build knows", kCaps);
  // Highway then leaves the disabled targets out of SupportedTargets, for dispatch and for
  // the tests' SetSupportedTargetsForTest alike.
  hwy::DisableTargets(~allowed);
}

void cap_simd_target_from_environment() {
  const char* value = std::getenv(kMaxSimdVariable);
  if (value != nullptr && *value != '\0') cap_simd_target(value);
}

std::string simd_target_name() {
  int64_t targets = hwy::SupportedTargets() & HWY_TARGETS;
  // None built within the cap (scalar on aarch64, where the fallback is NEON itself):
  // dispatch falls back to the static target.
  if (targets == 0) targets = HWY_STATIC_TARGET;
  return hwy::TargetName(targets & -targets);  // the lowest bit is the best target
}

int64_t built_simd_targets() { return HWY_TARGETS; }

int64_t static_simd_target() { return HWY_STATIC_TARGET; }

}  // namespace deferkv
