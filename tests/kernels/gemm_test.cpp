// gemm_f32_nt and gemm_f32_packed against float64 dot products, on every SIMD target, at
// shapes that leave partial register tiles in every dimension (tokens, weight rows or
// panels, vector tail of n) and, for long rows, several weight-row or k blocks.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "kernel_test_util.h"
#include "kernels/gemm.h"
#include "kernels/quant.h"

namespace deferkv {
namespace {

using testing::for_each_simd_target;
using testing::random_normal;

struct Shape {
  int64_t m, rows, n;
};

// The float64 dot product of x row i and w row j, and the sum of its terms' magnitudes.
std::pair<double, double> reference_dot(const std::vector<float>& x, int64_t ldx, int64_t i,
                                        const std::vector<float>& w, int64_t ldw, int64_t j, int64_t n) {
  double want = 0, magnitude = 0;
  for (int64_t k = 0; k < n; ++k) {
    want += static_cast<double>(x[i * ldx + k]) * w[j * ldw + k];
    magnitude += std::fabs(static_cast<double>(x[i * ldx + k]) * w[j * ldw + k]);
  }
  return {want, magnitude};
}

// Runs `product` (x, ldx, w, ldw, y, ldy) on each SIMD target at shape s, with padded rows,
// and checks y against float64 dot products and its padding untouched.
using Product = std::function<void(const float*, int64_t, const float*, int64_t, float*, int64_t)>;

// The m tokens (rows of x, ldx apart) as gemm_f32_packed reads them, for the target running now.
std::vector<float> pack_tokens(const float* x, int64_t ldx, int64_t n, int64_t m) {
  std::vector<float> tokens(gemm_packed_tokens_floats(m, n), 555.0f);
  const int64_t t = gemm_panel_tokens();
  gemm_pack_tokens(x, ldx, n, m, 0, (m + t - 1) / t, tokens.data());
  return tokens;
}
// `weights`, when given, are the rows the product reads (s.n + 5 apart) instead of random ones.
void expect_matches_reference(const Shape s, const Product& product, const std::vector<float>* weights = nullptr) {
  SCOPED_TRACE(::testing::Message() << s.m << " x " << s.rows << " x " << s.n);
  const int64_t ldx = s.n + 3, ldw = s.n + 5, ldy = s.rows + 2;
  const std::vector<float> x = random_normal(s.m * ldx, 1);
  const std::vector<float> w = weights != nullptr ? *weights : random_normal(s.rows * ldw, 2);
  for_each_simd_target([&](const char*) {
    std::vector<float> y(s.m * ldy, 777.0f);
    product(x.data(), ldx, w.data(), ldw, y.data(), ldy);
    for (int64_t i = 0; i < s.m; ++i) {
      for (int64_t j = 0; j < s.rows; ++j) {
        const auto [want, magnitude] = reference_dot(x, ldx, i, w, ldw, j, s.n);
        ASSERT_NEAR(y[i * ldy + j], want, 1e-5 * magnitude) << i << ", " << j;
      }
      for (int64_t j = s.rows; j < ldy; ++j) ASSERT_EQ(y[i * ldy + j], 777.0f);  // padding untouched
    }
  });
}

TEST(Gemm, MatchesReferenceWithPartialTilesAndPadding) {
  for (const Shape s : {Shape{1, 1, 1}, Shape{7, 13, 37}, Shape{25, 9, 100}, Shape{13, 70, 4099}}) {
    expect_matches_reference(s, [&](const float* x, int64_t ldx, const float* w, int64_t ldw, float* y, int64_t ldy) {
      gemm_f32_nt(x, ldx, s.m, w, ldw, s.rows, s.n, y, ldy);
    });
  }
}

TEST(GemmPacked, MatchesReferenceWithPartialTilesPanelsAndBlocks) {
  // 13 tokens leave a partial micro-tile on every target (6 or 12 a tile); 70 rows a
  // partial panel; n = 4099 several k-blocks and an odd last one; 200 tokens several
  // token blocks.
  for (const Shape s : {Shape{1, 1, 1}, Shape{7, 13, 37}, Shape{25, 9, 100}, Shape{13, 70, 4099}, Shape{200, 33, 300}}) {
    expect_matches_reference(s, [&](const float* x, int64_t ldx, const float* w, int64_t ldw, float* y, int64_t ldy) {
      std::vector<float> packed(gemm_packed_floats(s.rows, s.n), 555.0f);
      gemm_pack_rows(w, ldw, s.rows, s.n, packed.data());
      gemm_f32_packed(pack_tokens(x, ldx, s.n, s.m).data(), s.m, packed.data(), s.rows, s.n, y, ldy);
    });
  }
}

TEST(GemmPacked, EachValueIsTheSameWhateverTheTokensOrRowsBesideIt) {
  // The value for (token, row) must not depend on which other tokens or rows share the
  // call: a thread's slice of rows or a prompt's batch of tokens gives the same floats.
  const int64_t m = 40, rows = 50, n = 1000;
  const std::vector<float> x = random_normal(m * n, 3), w = random_normal(rows * n, 4);
  std::vector<float> packed(gemm_packed_floats(rows, n)), y(m * rows);
  gemm_pack_rows(w.data(), n, rows, n, packed.data());
  gemm_f32_packed(pack_tokens(x.data(), n, n, m).data(), m, packed.data(), rows, n, y.data(), rows);
  const int64_t i = 37, r0 = 9, count = 5;
  std::vector<float> part_packed(gemm_packed_floats(count, n)), part(count);
  gemm_pack_rows(w.data() + r0 * n, n, count, n, part_packed.data());
  gemm_f32_packed(pack_tokens(x.data() + i * n, n, n, 1).data(), 1, part_packed.data(), count, n, part.data(), count);
  for (int64_t j = 0; j < count; ++j) ASSERT_EQ(part[j], y[i * rows + r0 + j]) << j;
}

// F16 rows of random values, ldw elements apart, and the same rows widened to float32.
struct HalfRows {
  std::vector<uint16_t> bits;
  std::vector<float> widened;
};
HalfRows random_half_rows(int64_t rows, int64_t ldw, uint32_t seed) {
  HalfRows h;
  for (float v : random_normal(rows * ldw, seed)) {
    h.bits.push_back(fp32_to_fp16(v));
    h.widened.push_back(fp16_to_fp32(h.bits.back()));
  }
  return h;
}

TEST(GemmPacked, F16PanelsHoldEachRowsValueKAndPadWithZeros) {
  // 70 rows leave a short last panel on every target, n = 37 a tail past the eight values
  // of a row the x86 packing transposes at a time.
  const int64_t rows = 70, n = 37, ldw = n + 5;
  const HalfRows w = random_half_rows(rows, ldw, 6);
  for_each_simd_target([&](const char*) {
    const int64_t p = gemm_panel_rows();
    std::vector<uint16_t> packed(gemm_packed_floats(rows, n), 0x5555);
    gemm_pack_rows_f16(w.bits.data(), ldw, rows, n, packed.data());
    for (int64_t r0 = 0; r0 < rows; r0 += p) {
      for (int64_t k = 0; k < n; ++k) {
        for (int64_t j = 0; j < p; ++j) {
          const uint16_t want = r0 + j < rows ? w.bits[(r0 + j) * ldw + k] : uint16_t{0};
          ASSERT_EQ(packed[r0 * n + k * p + j], want) << "row " << r0 + j << ", k " << k;
        }
      }
    }
  });
}

TEST(GemmPacked, F16PanelsMatchReferenceWithPartialTilesPanelsAndBlocks) {
  // gemm_f16_packed widens as it reads, in k-blocks of its own length: n = 4099 takes
  // several and an odd last one on every target.
  for (const Shape s : {Shape{1, 1, 1}, Shape{7, 13, 37}, Shape{13, 70, 4099}, Shape{200, 33, 300}}) {
    const int64_t ldw = s.n + 5;
    const HalfRows w = random_half_rows(s.rows, ldw, 8);
    expect_matches_reference(
        s,
        [&](const float* x, int64_t ldx, const float*, int64_t, float* y, int64_t ldy) {
          std::vector<uint16_t> halves(gemm_packed_floats(s.rows, s.n), 0x5555);
          gemm_pack_rows_f16(w.bits.data(), ldw, s.rows, s.n, halves.data());
          gemm_f16_packed(pack_tokens(x, ldx, s.n, s.m).data(), s.m, halves.data(), s.rows, s.n, y, ldy);
        },
        &w.widened);
  }
}

TEST(GemmPacked, F16ValuesAreTheSameWhateverTheTokensOrRowsBesideThem) {
  const int64_t m = 40, rows = 50, n = 3000;
  const std::vector<float> x = random_normal(m * n, 9);
  const HalfRows w = random_half_rows(rows, n, 10);
  std::vector<uint16_t> halves(gemm_packed_floats(rows, n));
  std::vector<float> y(m * rows);
  gemm_pack_rows_f16(w.bits.data(), n, rows, n, halves.data());
  gemm_f16_packed(pack_tokens(x.data(), n, n, m).data(), m, halves.data(), rows, n, y.data(), rows);
  const int64_t i = 37, r0 = 9, count = 5;
  std::vector<uint16_t> part_halves(gemm_packed_floats(count, n));
  std::vector<float> part(count);
  gemm_pack_rows_f16(w.bits.data() + r0 * n, n, count, n, part_halves.data());
  gemm_f16_packed(pack_tokens(x.data() + i * n, n, n, 1).data(), 1, part_halves.data(), count, n, part.data(), count);
  for (int64_t j = 0; j < count; ++j) ASSERT_EQ(part[j], y[i * rows + r0 + j]) << j;
}

TEST(GemmPacked, TokensPackInDisjointPanelsAndPadWithZeros) {
  // The forward pass packs a prompt's token panels on several threads at once, each a
  // range of panels: together they must be the one-call packing, and every value of the
  // last panel's tokens past m zero (they run through the micro-kernel).
  const int64_t m = 29, n = 37, ldx = n + 2;
  const std::vector<float> x = random_normal(m * ldx, 5);
  for_each_simd_target([&](const char*) {
    const int64_t t = gemm_panel_tokens(), panels = (m + t - 1) / t;
    const std::vector<float> whole = pack_tokens(x.data(), ldx, n, m);
    std::vector<float> parts(gemm_packed_tokens_floats(m, n), 555.0f);
    gemm_pack_tokens(x.data(), ldx, n, m, 1, panels - 1, parts.data());
    gemm_pack_tokens(x.data(), ldx, n, m, 0, 1, parts.data());
    for (int64_t i = 0; i < panels * t * n; ++i) ASSERT_EQ(parts[i], whole[i]) << i;
    for (int64_t i = 0; i < panels * t; ++i) {
      const int64_t p = i / t, slot = i % t;
      for (int64_t k = 0; k < n; ++k) {
        ASSERT_EQ(whole[p * t * n + k * t + slot], i < m ? x[i * ldx + k] : 0.0f) << i << ", " << k;
      }
    }
  });
}

}  // namespace
}  // namespace deferkv
