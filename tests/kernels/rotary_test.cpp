// Rotary: RoPE applied outside the forward pass, as presses use it.
#include <gtest/gtest.h>

#include <cmath>

#include "kernels/rope.h"

namespace deferkv {
namespace {

TEST(Rotary, NegativePositionUndoesAndPositionsAdd) {
  for (bool interleaved : {false, true}) {
    const Rotary rotary{8, 10000.0f, 1.0f, {1.0f, 2.0f, 1.0f, 8.0f}, interleaved};
    std::vector<float> x = {0.3f, -1.2f, 0.7f, 2.0f, -0.4f, 0.9f, 1.5f, -0.8f, 0.25f, 0.5f};  // head_dim 10, n_rot 8
    const auto original = x;
    rotary.rotate(x.data(), 1, 10, 37);
    EXPECT_GT(std::abs(x[0] - original[0]), 1e-3);
    EXPECT_EQ(x[8], original[8]);  // dims past n_rot are not rotated
    rotary.rotate(x.data(), 1, 10, -37);
    for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(x[i], original[i], 1e-5);
    auto a = original, b = original;
    rotary.rotate(a.data(), 1, 10, 30);
    rotary.rotate(a.data(), 1, 10, 12);
    rotary.rotate(b.data(), 1, 10, 42);
    for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-5);
  }
}

TEST(Rotary, PairAngleIsPositionTimesFrequency) {
  // NeoX pairs (i, i + n_rot/2); pair 1 of n_rot 4 turns by p * base^(-2/4) / factor.
  const Rotary rotary{4, 100.0f, 0.5f, {1.0f, 2.0f}, false};
  std::vector<float> x = {0.0f, 1.0f, 0.0f, 0.0f};
  rotary.rotate(x.data(), 1, 4, 8);
  const double theta = 8 * 0.5 * std::pow(100.0, -0.5) / 2.0;
  EXPECT_NEAR(x[1], std::cos(theta), 1e-6);
  EXPECT_NEAR(x[3], std::sin(theta), 1e-6);
}

}  // namespace
}  // namespace deferkv
