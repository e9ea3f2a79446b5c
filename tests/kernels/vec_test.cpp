// Float32 vector kernels against float64 references, on every SIMD target, at lengths
// that exercise both the vector body and the scalar tail.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "kernel_test_util.h"
#include "kernels/vec.h"

namespace deferkv {
namespace {

using testing::for_each_simd_target;
using testing::random_normal;

constexpr int64_t kLengths[] = {1, 3, 16, 17, 64, 100, 1000, 4099};

TEST(Vec, DotF32) {
  for (int64_t n : kLengths) {
    const std::vector<float> a = random_normal(n, 1), b = random_normal(n, 2);
    double want = 0, magnitude = 0;
    for (int64_t i = 0; i < n; ++i) {
      want += static_cast<double>(a[i]) * b[i];
      magnitude += std::fabs(static_cast<double>(a[i]) * b[i]);
    }
    for_each_simd_target([&](const char*) {
      EXPECT_NEAR(dot_f32(a.data(), b.data(), n), want, 1e-6 * magnitude) << n;
    });
  }
}

TEST(Vec, AxpyScaleAdd) {
  for (int64_t n : kLengths) {
    const std::vector<float> x = random_normal(n, 3), y0 = random_normal(n, 4);
    for_each_simd_target([&](const char*) {
      std::vector<float> y = y0;
      axpy_f32(0.75f, x.data(), y.data(), n);
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_NEAR(y[i], y0[i] + 0.75 * x[i], 1e-6 * (1 + std::fabs(y0[i]))) << i;
      }
      y = y0;
      scale_f32(-3.0f, y.data(), n);
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(y[i], -3.0f * y0[i]) << i;
      y = y0;
      add_f32(x.data(), y.data(), n);
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(y[i], y0[i] + x[i]) << i;
    });
  }
}

TEST(Vec, RmsNorm) {
  for (int64_t n : kLengths) {
    const std::vector<float> x = random_normal(n, 5, 30.0f), weight = random_normal(n, 6);
    double sum_sq = 0;
    for (float v : x) sum_sq += static_cast<double>(v) * v;
    const double inv_rms = 1.0 / std::sqrt(sum_sq / static_cast<double>(n) + 1e-5);
    for_each_simd_target([&](const char*) {
      std::vector<float> out(n);
      rms_norm_f32(x.data(), weight.data(), 1e-5f, out.data(), n);
      for (int64_t i = 0; i < n; ++i) {
        const double want = x[i] * inv_rms * weight[i];
        ASSERT_NEAR(out[i], want, 1e-5 * (1 + std::fabs(want))) << i;
      }
      std::vector<float> in_place = x;  // out may alias x
      rms_norm_f32(in_place.data(), weight.data(), 1e-5f, in_place.data(), n);
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(in_place[i], out[i]) << i;
    });
  }
}

void expect_softmax(std::vector<float> x) {
  const auto n = static_cast<int64_t>(x.size());
  double max = -std::numeric_limits<double>::infinity();
  for (float v : x) max = std::max(max, static_cast<double>(v));
  double sum = 0;
  for (float v : x) sum += std::exp(static_cast<double>(v) - max);
  for_each_simd_target([&](const char*) {
    std::vector<float> p = x;
    const float returned = softmax_f32(p.data(), n);
    EXPECT_NEAR(returned, sum, 1e-5 * sum);
    double total = 0;
    for (int64_t i = 0; i < n; ++i) {
      const double want = std::exp(static_cast<double>(x[i]) - max) / sum;
      ASSERT_NEAR(p[i], want, 1e-6 + 1e-5 * want) << i;
      total += p[i];
    }
    EXPECT_NEAR(total, 1.0, 1e-5);
  });
}

TEST(Vec, Softmax) {
  for (int64_t n : kLengths) expect_softmax(random_normal(n, 7, 3.0f));
}

TEST(Vec, SoftmaxLargeAndMaskedValues) {
  std::vector<float> x = random_normal(77, 8, 5.0f);
  for (float& v : x) v += 1000.0f;  // exp(1000) overflows unless the max is subtracted
  expect_softmax(x);
  x[3] = -std::numeric_limits<float>::infinity();  // masked scores get probability 0
  x[40] = -1e30f;
  expect_softmax(x);
  std::vector<float> y(33, -50000.0f);
  y[32] = 88.0f;  // one dominant value, the rest underflow to 0
  expect_softmax(y);
}

TEST(Vec, FirstNotAboveFindsTheFirstValueAtOrBelowTheCutOrNaN) {
  for (int64_t n : kLengths) {
    const std::vector<float> x0 = random_normal(n, 12);
    for_each_simd_target([&](const char*) {
      // Every position in turn holds the only value not above the cut: equal, below, NaN.
      for (float low : {-10.0f, -20.0f, std::numeric_limits<float>::quiet_NaN()}) {
        for (int64_t at = 0; at < n; ++at) {
          std::vector<float> x = x0;
          for (float& v : x) v = std::fabs(v);  // all above -10
          x[at] = low;
          ASSERT_EQ(first_not_above_f32(x.data(), n, -10.0f), at) << n << " " << low;
          if (at + 1 < n) x[at + 1] = -30.0f;  // a later one does not change the answer
          ASSERT_EQ(first_not_above_f32(x.data(), n, -10.0f), at) << n << " " << low;
        }
      }
      ASSERT_EQ(first_not_above_f32(x0.data(), n, -1e30f), n);
      ASSERT_EQ(first_not_above_f32(x0.data(), 0, -1e30f), 0);
    });
  }
}

TEST(Vec, ExpShiftIntoAnotherRowOrOnlyItsSumIsTheInPlaceOne) {
  for (int64_t n : kLengths) {
    const std::vector<float> x = random_normal(n, 13, 3.0f);
    for_each_simd_target([&](const char*) {
      std::vector<float> in_place = x, out(static_cast<size_t>(n));
      const float sum = exp_shift_f32(in_place.data(), 2.5f, n);
      EXPECT_EQ(exp_shift_to_f32(x.data(), 2.5f, n, out.data()), sum) << n;
      EXPECT_EQ(out, in_place) << n;
      EXPECT_EQ(exp_shift_to_f32(x.data(), 2.5f, n, nullptr), sum) << n;
      for (int64_t i = 0; i < n; ++i) ASSERT_NEAR(in_place[i], std::exp(double(x[i]) - 2.5), 2e-6 * in_place[i]);
    });
  }
}

TEST(Vec, DivideRoundsAsScalarDivision) {
  for (int64_t n : kLengths) {
    const std::vector<float> x = random_normal(n, 14, 3.0f);
    for_each_simd_target([&](const char*) {
      std::vector<float> y = x;
      divide_f32(y.data(), 3.0f, n);
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(y[i], x[i] / 3.0f) << n << " " << i;
    });
  }
}

TEST(Vec, Swiglu) {
  for (int64_t n : kLengths) {
    std::vector<float> gate0 = random_normal(n, 9, 4.0f);
    gate0[0] = -200.0f;  // e^200 overflows float: silu must still give -0
    if (n > 1) gate0[1] = 120.0f;
    const std::vector<float> up = random_normal(n, 10);
    for_each_simd_target([&](const char*) {
      std::vector<float> gate = gate0;
      swiglu_f32(gate.data(), up.data(), n);
      for (int64_t i = 0; i < n; ++i) {
        const double g = gate0[i];
        const double want = g / (1.0 + std::exp(-g)) * up[i];
        ASSERT_NEAR(gate[i], want, 1e-6 * (1 + std::fabs(want))) << i;
      }
    });
  }
}

}  // namespace
}  // namespace deferkv
