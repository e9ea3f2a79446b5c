// fp16 / bf16 <-> fp32 conversions: exactness, round-to-nearest-even, inf, NaN, subnormals.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <utility>
#include <vector>

#include "kernel_test_util.h"
#include "kernels/quant.h"
#include "tensor/dtype.h"

namespace deferkv {
namespace {

float from_bits(uint32_t bits) { return std::bit_cast<float>(bits); }

TEST(Fp16, DecodesKnownValues) {
  EXPECT_EQ(fp16_to_fp32(0x0000), 0.0f);
  EXPECT_TRUE(std::signbit(fp16_to_fp32(0x8000)));
  EXPECT_EQ(fp16_to_fp32(0x3c00), 1.0f);
  EXPECT_EQ(fp16_to_fp32(0xc000), -2.0f);
  EXPECT_EQ(fp16_to_fp32(0x3555), 0x1.554p-2f);
  EXPECT_EQ(fp16_to_fp32(0x7bff), 65504.0f);
  EXPECT_EQ(fp16_to_fp32(0x0400), 0x1p-14f);   // smallest normal
  EXPECT_EQ(fp16_to_fp32(0x0001), 0x1p-24f);   // smallest subnormal
  EXPECT_EQ(fp16_to_fp32(0x03ff), 0x3ffp-24f); // largest subnormal
  EXPECT_EQ(fp16_to_fp32(0x8001), -0x1p-24f);
  EXPECT_EQ(fp16_to_fp32(0x7c00), std::numeric_limits<float>::infinity());
  EXPECT_EQ(fp16_to_fp32(0xfc00), -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(fp16_to_fp32(0x7e00)));
  EXPECT_TRUE(std::isnan(fp16_to_fp32(0x7c01)));  // signalling NaN stays NaN
}

TEST(Fp16, EveryHalfRoundTrips) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const auto half = static_cast<uint16_t>(h);
    const float f = fp16_to_fp32(half);
    if (std::isnan(f)) {
      const uint16_t back = fp32_to_fp16(f);
      EXPECT_EQ(back & 0x7c00, 0x7c00) << h;
      EXPECT_NE(back & 0x03ff, 0) << h;  // still NaN, not infinity
      EXPECT_EQ(back & 0x8000, half & 0x8000) << h;
    } else {
      EXPECT_EQ(fp32_to_fp16(f), half) << h;
    }
  }
}

TEST(Fp16, RoundsToNearestEven) {
  // Ties between 1 and 1 + 2^-10: to the even mantissa.
  EXPECT_EQ(fp32_to_fp16(1.0f + 0x1p-11f), 0x3c00);
  EXPECT_EQ(fp32_to_fp16(1.0f + 3 * 0x1p-11f), 0x3c02);
  EXPECT_EQ(fp32_to_fp16(1.0f + 0x1p-11f + 0x1p-20f), 0x3c01);  // just above the tie
  EXPECT_EQ(fp32_to_fp16(-(1.0f + 0x1p-11f + 0x1p-20f)), 0xbc01);
  // Mantissa overflow carries into the exponent: 2 - 2^-12 rounds up to 2.
  EXPECT_EQ(fp32_to_fp16(2.0f - 0x1p-12f), 0x4000);
  // Overflow: 65519 stays finite, 65520 (the tie above 65504) becomes infinity.
  EXPECT_EQ(fp32_to_fp16(65519.0f), 0x7bff);
  EXPECT_EQ(fp32_to_fp16(65520.0f), 0x7c00);
  EXPECT_EQ(fp32_to_fp16(1e10f), 0x7c00);
  EXPECT_EQ(fp32_to_fp16(-1e10f), 0xfc00);
  EXPECT_EQ(fp32_to_fp16(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_EQ(fp32_to_fp16(-std::numeric_limits<float>::infinity()), 0xfc00);
}

TEST(Fp16, RoundsSubnormals) {
  EXPECT_EQ(fp32_to_fp16(0x1p-24f), 0x0001);
  EXPECT_EQ(fp32_to_fp16(0x1p-25f), 0x0000);            // tie to even (0)
  EXPECT_EQ(fp32_to_fp16(3 * 0x1p-25f), 0x0002);        // tie to even (2)
  EXPECT_EQ(fp32_to_fp16(0x1p-25f + 0x1p-40f), 0x0001); // just above the tie
  EXPECT_EQ(fp32_to_fp16(0x1p-14f - 0x1p-25f), 0x0400); // tie rounds up into the normals
  EXPECT_EQ(fp32_to_fp16(1e-30f), 0x0000);
  EXPECT_EQ(fp32_to_fp16(-1e-30f), 0x8000);
  EXPECT_EQ(fp32_to_fp16(from_bits(0x00000001)), 0x0000);  // float subnormal
}

// The compiler's own IEEE half: ACLE's __fp16 on aarch64 (GCC 12 has no _Float16 in C++
// there), _Float16 elsewhere when the compiler has it.
#if defined(__aarch64__)
using CompilerHalf = __fp16;
#define DEFERKV_COMPILER_HALF 1
#elif defined(__FLT16_MAX__)
using CompilerHalf = _Float16;
#define DEFERKV_COMPILER_HALF 1
#endif

TEST(Fp16, MatchesCompilerConversionOnRandomFloats) {
#if defined(DEFERKV_COMPILER_HALF)
  std::mt19937 rng(7);
  std::uniform_int_distribution<uint32_t> any_bits;
  for (int i = 0; i < 200000; ++i) {
    // Exponents concentrated around the half range so that normals, subnormals and
    // overflow all occur.
    uint32_t bits = any_bits(rng);
    bits = (bits & 0x807fffffu) | ((100u + (bits >> 23) % 60u) << 23);
    const float f = from_bits(bits);
    const auto expected = std::bit_cast<uint16_t>(static_cast<CompilerHalf>(f));
    ASSERT_EQ(fp32_to_fp16(f), expected) << std::hexfloat << f;
  }
#else
  GTEST_SKIP() << "compiler has no IEEE half type";
#endif
}

TEST(Bf16, ConvertsAndRoundsToNearestEven) {
  EXPECT_EQ(bf16_to_fp32(0x3f80), 1.0f);
  EXPECT_EQ(bf16_to_fp32(0xc040), -3.0f);
  EXPECT_EQ(bf16_to_fp32(0x0001), from_bits(0x00010000));  // subnormal kept exactly
  EXPECT_EQ(fp32_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(fp32_to_bf16(from_bits(0x3f808000)), 0x3f80);  // tie, even stays
  EXPECT_EQ(fp32_to_bf16(from_bits(0x3f818000)), 0x3f82);  // tie, odd rounds up
  EXPECT_EQ(fp32_to_bf16(from_bits(0x3f808001)), 0x3f81);
  EXPECT_EQ(fp32_to_bf16(from_bits(0x3f807fff)), 0x3f80);
  EXPECT_EQ(fp32_to_bf16(from_bits(0x00018000)), 0x0002);  // subnormal tie to even
  EXPECT_EQ(fp32_to_bf16(std::numeric_limits<float>::max()), 0x7f80);  // rounds to inf
  EXPECT_EQ(fp32_to_bf16(-std::numeric_limits<float>::infinity()), 0xff80);
  const uint16_t nan = fp32_to_bf16(from_bits(0x7f800001));  // payload only in low bits
  EXPECT_TRUE(std::isnan(bf16_to_fp32(nan)));
  EXPECT_TRUE(std::isnan(bf16_to_fp32(fp32_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = bf16_to_fp32(static_cast<uint16_t>(h));
    if (!std::isnan(f)) ASSERT_EQ(fp32_to_bf16(f), h);
  }
}

TEST(Fp16, SimdRowConversionsMatchScalar) {
  // dequantize_row converts F16 / BF16 rows with SIMD: every bit pattern must decode as
  // the scalar conversion does (NaN to some NaN).
  std::vector<uint16_t> all(0x10000);
  for (uint32_t h = 0; h < 0x10000; ++h) all[h] = static_cast<uint16_t>(h);
  testing::for_each_simd_target([&](const char*) {
    std::vector<float> out(all.size());
    const std::pair<DType, float (*)(uint16_t)> kTypes[] = {{DType::F16, fp16_to_fp32},
                                                             {DType::BF16, bf16_to_fp32}};
    for (auto [type, scalar] : kTypes) {
      dequantize_row(type, all.data(), out.data(), static_cast<int64_t>(all.size()));
      for (uint32_t h = 0; h < 0x10000; ++h) {
        const float want = scalar(static_cast<uint16_t>(h));
        if (std::isnan(want)) {
          ASSERT_TRUE(std::isnan(out[h])) << dtype_name(type) << " " << h;
        } else {
          ASSERT_EQ(std::bit_cast<uint32_t>(out[h]), std::bit_cast<uint32_t>(want))
              << dtype_name(type) << " " << h;
        }
      }
    }
  });
}

}  // namespace
}  // namespace deferkv
