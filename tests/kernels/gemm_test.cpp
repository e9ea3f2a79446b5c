// gemm_f32_nt against float64 dot products, on every SIMD target, at shapes that leave
// partial register tiles in every dimension (tokens, weight rows, vector tail of n) and,
// for long rows, several weight-row blocks.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernel_test_util.h"
#include "kernels/gemm.h"

namespace deferkv {
namespace {

using testing::for_each_simd_target;
using testing::random_normal;

struct Shape {
  int64_t m, rows, n;
};

TEST(Gemm, MatchesReferenceWithPartialTilesAndPadding) {
  for (const Shape s : {Shape{1, 1, 1}, Shape{7, 13, 37}, Shape{25, 9, 100}, Shape{13, 70, 4099}}) {
    SCOPED_TRACE(::testing::Message() << s.m << " x " << s.rows << " x " << s.n);
    const int64_t ldx = s.n + 3, ldw = s.n + 5, ldy = s.rows + 2;
    const std::vector<float> x = random_normal(s.m * ldx, 1), w = random_normal(s.rows * ldw, 2);
    for_each_simd_target([&](const char*) {
      std::vector<float> y(s.m * ldy, 777.0f);
      gemm_f32_nt(x.data(), ldx, s.m, w.data(), ldw, s.rows, s.n, y.data(), ldy);
      for (int64_t i = 0; i < s.m; ++i) {
        for (int64_t j = 0; j < s.rows; ++j) {
          double want = 0, magnitude = 0;
          for (int64_t k = 0; k < s.n; ++k) {
            want += static_cast<double>(x[i * ldx + k]) * w[j * ldw + k];
            magnitude += std::fabs(static_cast<double>(x[i * ldx + k]) * w[j * ldw + k]);
          }
          ASSERT_NEAR(y[i * ldy + j], want, 1e-5 * magnitude) << i << ", " << j;
        }
        for (int64_t j = s.rows; j < ldy; ++j) ASSERT_EQ(y[i * ldy + j], 777.0f);  // padding untouched
      }
    });
  }
}

}  // namespace
}  // namespace deferkv
