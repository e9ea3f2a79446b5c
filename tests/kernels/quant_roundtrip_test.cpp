// dequantize_row(quantize_row(x)) stays close to x, within per-type bounds that follow
// from each format's precision (and were checked against measured errors with margin).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "kernel_test_util.h"
#include "kernels/quant.h"

namespace deferkv {
namespace {

using testing::random_normal;

std::vector<float> round_trip(DType type, const std::vector<float>& x) {
  const auto n = static_cast<int64_t>(x.size());
  std::vector<unsigned char> bytes(static_cast<size_t>(dtype_row_bytes(type, n)));
  std::vector<float> y(x.size());
  quantize_row(type, x.data(), bytes.data(), n);
  dequantize_row(type, bytes.data(), y.data(), n);
  return y;
}

struct Bounds {
  DType type;
  double max_error;  // max |x - y| within a block, relative to the block's max |x|
  double rms_error;  // rms(x - y) / rms(x) over standard normal data
};

// Q8_0: half a step of max/127. Q4_0 and Q6_K: a full step of max/8, max/32 (the
// extreme maps to -8 or -32, so an equal value of the other sign clips at +7 or +31).
// Q4_K, Q5_K: half a step of the sub-block range plus the rounding of the six-bit mins.
constexpr Bounds kQuantisedBounds[] = {
    {DType::Q8_0, 0.0041, 0.007}, {DType::Q4_0, 0.126, 0.10}, {DType::Q4_K, 0.08, 0.09},
    {DType::Q5_K, 0.04, 0.045},   {DType::Q6_K, 0.032, 0.025},
};

TEST(QuantRoundTrip, QuantisedTypesStayWithinBounds) {
  const std::vector<float> x = random_normal(256 * 64, 11);
  for (const Bounds& bounds : kQuantisedBounds) {
    SCOPED_TRACE(dtype_name(bounds.type));
    const std::vector<float> y = round_trip(bounds.type, x);
    const auto block = static_cast<size_t>(dtype_block_elems(bounds.type));
    double err2 = 0, x2 = 0;
    for (size_t b = 0; b < x.size(); b += block) {
      double amax = 0, emax = 0;
      for (size_t i = b; i < b + block; ++i) {
        amax = std::max(amax, static_cast<double>(std::fabs(x[i])));
        emax = std::max(emax, static_cast<double>(std::fabs(x[i] - y[i])));
        err2 += (x[i] - y[i]) * (x[i] - y[i]);
        x2 += x[i] * x[i];
      }
      ASSERT_LE(emax, bounds.max_error * amax) << "block at " << b;
    }
    EXPECT_LE(std::sqrt(err2 / x2), bounds.rms_error);
  }
}

TEST(QuantRoundTrip, FloatTypesRoundEachValue) {
  std::vector<float> x = random_normal(4096, 12, 100.0f);
  x[0] = 0.0f;
  x[1] = 1e-6f;  // an fp16 subnormal
  const std::pair<DType, double> kRelativeError[] = {
      {DType::F32, 0.0}, {DType::F16, 0x1p-11}, {DType::BF16, 0x1p-8}};
  for (auto [type, relative] : kRelativeError) {
    SCOPED_TRACE(dtype_name(type));
    const std::vector<float> y = round_trip(type, x);
    for (size_t i = 0; i < x.size(); ++i) {
      ASSERT_LE(std::fabs(x[i] - y[i]), relative * std::fabs(x[i]) + 0x1p-25) << i;
    }
  }
}

TEST(QuantRoundTrip, AwkwardBlocks) {
  // Zeros, a constant, all-positive values (the K-quant min is then 0), one outlier in
  // small values, and large magnitudes: each 256-block of a different kind.
  std::vector<float> x(256 * 5);
  std::fill(x.begin() + 256, x.begin() + 512, 3.25f);
  for (int i = 0; i < 256; ++i) x[512 + i] = 1.0f + i / 256.0f;
  for (int i = 0; i < 256; ++i) x[768 + i] = (i % 7) * 1e-3f;
  x[768 + 100] = 50.0f;
  for (int i = 0; i < 256; ++i) x[1024 + i] = (i - 128) * 100.0f;
  for (DType type : testing::kAllTypes) {
    SCOPED_TRACE(dtype_name(type));
    const std::vector<float> y = round_trip(type, x);
    for (int i = 0; i < 256; ++i) ASSERT_EQ(y[i], 0.0f) << i;
    // Within an eighth of the 256-block's largest magnitude: beyond every format's
    // error (Q4_0's is max/8 of its 32-block), so this catches sign, offset and scale
    // mix-ups on unusual data.
    for (size_t b = 256; b < x.size(); b += 256) {
      float amax = 0;
      for (size_t i = b; i < b + 256; ++i) amax = std::max(amax, std::fabs(x[i]));
      for (size_t i = b; i < b + 256; ++i) ASSERT_NEAR(y[i], x[i], 0.13f * amax) << i;
    }
  }
}

}  // namespace
}  // namespace deferkv
