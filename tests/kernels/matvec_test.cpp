// matvec, matvec_rows and matmul against float64 dot products of the dequantised weights with the
// original float32 activations, on every SIMD target.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <vector>

#include "kernel_test_util.h"
#include "deferkv/error.h"
#include "kernels/gemm.h"
#include "kernels/matvec.h"

namespace deferkv {
namespace {

using testing::for_each_simd_target;
using testing::is_quantised;
using testing::kAllTypes;
using testing::quantise_matrix;
using testing::random_normal;
using testing::reference_dots;
using testing::ReferenceDots;
using testing::relative_error;
using testing::WeightMatrix;

// Error allowed per row, relative to sum |w_i x_i|. Float weights meet x unchanged, so
// only float32 rounding separates them from the reference. Quantised weights meet an
// integer copy of x (packed_activation.h): 15 bits per 32-block, 10 bits per 256-block,
// so a few 1e-4 at worst for K-quants. The requirement is 1e-2; these bounds are tighter
// so that a loss of activation precision would show.
double tolerance(DType type) {
  if (!is_quantised(type)) return 1e-5;
  return dtype_block_elems(type) == 32 ? 1e-4 : 2e-3;
}

// The int8 form of the activation (the K-quants under KQuantActivation::kInt8) rounds each value
// by up to max|x| / 254 of its block: for normal x about 6.6e-3 of ||y|| over the rows
// (the per-row bound above still holds, as sum |w_i x_i| is far larger than |y|). So the
// relative error over the rows is held to the requirement, 1e-2, for it alone;
// matvec_int8_test.cpp checks that form exactly against its own quantisation.
double relative_tolerance(DType type) {
  return takes_int8_activation(type) ? 1e-2 : tolerance(type);
}

void expect_close(DType type, const float* y, const ReferenceDots& ref) {
  for (size_t r = 0; r < ref.dot.size(); ++r) {
    ASSERT_LE(std::fabs(y[r] - ref.dot[r]), tolerance(type) * ref.magnitude[r]) << "row " << r;
  }
  EXPECT_LT(relative_error(y, ref.dot), relative_tolerance(type));
}

// Runs body once with each form of the K-quant activation (the int16 one stays selectable,
// DEFERKV_KQUANT_ACTIVATION=int16) and restores the setting.
template <class Body>
void with_each_kquant_form(const Body& body) {
  const KQuantActivation previous = kquant_activation();
  for (KQuantActivation form : {KQuantActivation::kInt16, KQuantActivation::kInt8}) {
    SCOPED_TRACE(form == KQuantActivation::kInt8 ? "int8 K-quant activation" : "int16 K-quant activation");
    set_kquant_activation(form);
    body();
  }
  set_kquant_activation(previous);
}

void check_matvec(DType type, int64_t rows, int64_t n, size_t padding) {
  SCOPED_TRACE(dtype_name(type));
  const WeightMatrix w = quantise_matrix(type, random_normal(rows * n, 21), rows, n, padding);
  const std::vector<float> x = random_normal(n, 22);
  const ReferenceDots ref = reference_dots(w, x.data());
  std::vector<unsigned char> packed(packed_activation_bytes(type, n));
  for_each_simd_target([&](const char*) {
    std::vector<float> y(rows + 1, 12345.0f);
    pack_activation(type, x.data(), n, packed.data());
    matvec(type, w.bytes.data(), w.stride, n, packed.data(), y.data(), rows);
    expect_close(type, y.data(), ref);
    EXPECT_EQ(y[rows], 12345.0f);  // nothing written past the last row
  });
}

TEST(Matvec, MatchesReferenceForEveryType) {
  with_each_kquant_form([] {
    for (DType type : kAllTypes) check_matvec(type, 37, 1024, 0);
  });
}

TEST(Matvec, HonoursRowStride) {
  with_each_kquant_form([] {
    for (DType type : kAllTypes) check_matvec(type, 9, 512, 40);
  });
}

TEST(Matvec, FloatTypesTakeAnyLength) {
  for (DType type : {DType::F32, DType::F16, DType::BF16}) {
    for (int64_t n : {1, 7, 100, 1003}) check_matvec(type, 5, n, 2);
  }
}

TEST(Matvec, ExtremeActivations) {
  // Huge and tiny activation blocks next to each other, and a zero block: the int8
  // packing is per block, so each keeps its own precision.
  const int64_t rows = 6, n = 768;
  std::vector<float> x = random_normal(n, 23);
  for (int64_t i = 0; i < 256; ++i) x[i] *= 1e4f;
  for (int64_t i = 256; i < 512; ++i) x[i] = 0.0f;
  for (int64_t i = 512; i < n; ++i) x[i] *= 1e-4f;
  with_each_kquant_form([&] {
  for (DType type : kAllTypes) {
    SCOPED_TRACE(dtype_name(type));
    const WeightMatrix w = quantise_matrix(type, random_normal(rows * n, 24), rows, n);
    const ReferenceDots ref = reference_dots(w, x.data());
    std::vector<unsigned char> packed(packed_activation_bytes(type, n));
    std::vector<float> y(rows);
    pack_activation(type, x.data(), n, packed.data());
    matvec(type, w.bytes.data(), w.stride, n, packed.data(), y.data(), rows);
    expect_close(type, y.data(), ref);
  }
  });
}

// matvec_rows on m activations against matvec on each alone, bit for bit, and against
// the float64 reference. The row count spans two full 16-row tiles and a short one; the
// activation counts take full groups (4 for quantised weights, 2 or 3 for float ones)
// and every remainder; y rows and packed activations sit further apart than they need.
void check_matvec_rows(DType type, int64_t rows, int64_t n) {
  SCOPED_TRACE(dtype_name(type));
  const WeightMatrix w = quantise_matrix(type, random_normal(rows * n, 61), rows, n, 24);
  const int64_t max_m = 9, ldy = rows + 3;
  const size_t stride = packed_activation_stride(type, n) + 64;
  const std::vector<float> x = random_normal(max_m * n, 62);
  std::vector<unsigned char> packed(stride * max_m);
  for (int64_t i = 0; i < max_m; ++i) pack_activation(type, x.data() + i * n, n, packed.data() + i * stride);
  std::vector<ReferenceDots> refs;
  for (int64_t i = 0; i < max_m; ++i) refs.push_back(reference_dots(w, x.data() + i * n));
  for_each_simd_target([&](const char*) {
    std::vector<float> alone(max_m * rows);
    for (int64_t i = 0; i < max_m; ++i) {
      matvec(type, w.bytes.data(), w.stride, n, packed.data() + i * stride, alone.data() + i * rows, rows);
    }
    for (int64_t m = 1; m <= max_m; ++m) {
      SCOPED_TRACE(m);
      std::vector<float> y(m * ldy, 777.0f);
      matvec_rows(type, w.bytes.data(), w.stride, n, packed.data(), stride, m, y.data(), ldy, rows);
      for (int64_t i = 0; i < m; ++i) {
        SCOPED_TRACE(i);
        for (int64_t r = 0; r < rows; ++r) {
          ASSERT_EQ(std::bit_cast<uint32_t>(y[i * ldy + r]), std::bit_cast<uint32_t>(alone[i * rows + r]))
              << "row " << r << ": " << y[i * ldy + r] << " vs " << alone[i * rows + r];
        }
        expect_close(type, y.data() + i * ldy, refs[i]);
        for (int64_t r = rows; r < ldy; ++r) ASSERT_EQ(y[i * ldy + r], 777.0f);  // y's padding untouched
      }
    }
  });
}

TEST(MatvecRows, EachRowAsMatvecGivesItForEveryType) {
  with_each_kquant_form([] {
    for (DType type : kAllTypes) check_matvec_rows(type, 37, 1024);
  });
}

TEST(MatvecRows, FloatTypesTakeAnyLength) {
  // Lengths below one vector, with a scalar tail, and with a tail of whole vectors
  // (the float kernels take 4 vectors per step).
  for (DType type : {DType::F32, DType::F16, DType::BF16}) {
    for (int64_t n : {5, 100, 1003}) check_matvec_rows(type, 18, n);
  }
}

// matmul with the tokens packed as the forward pass packs them where it takes the GEMM
// (on the target running now).
void packed_matmul(DType type, const void* weights, size_t stride, int64_t n, int64_t rows, const float* x,
                   int64_t ldx, int64_t m, float* y, int64_t ldy, float* scratch) {
  std::vector<float> tokens;
  if (matmul_by_gemm(type, m)) {
    tokens.resize(gemm_packed_tokens_floats(m, n));
    const int64_t t = gemm_panel_tokens();
    gemm_pack_tokens(x, ldx, n, m, 0, (m + t - 1) / t, tokens.data());
  }
  matmul(type, weights, stride, n, rows, x, ldx, tokens.empty() ? nullptr : tokens.data(), m, y, ldy, scratch);
}

TEST(Matmul, GemmWithoutPackedTokensFails) {
  const int64_t rows = 4, n = 64, m = 200;
  const WeightMatrix w = quantise_matrix(DType::F32, random_normal(rows * n, 71), rows, n);
  const std::vector<float> x = random_normal(m * n, 72);
  std::vector<float> y(m * rows), scratch(scratch_floats_for_matmul(rows, n));
  ASSERT_TRUE(matmul_by_gemm(DType::F32, m));
  EXPECT_THROW(matmul(DType::F32, w.bytes.data(), w.stride, n, rows, x.data(), n, nullptr, m, y.data(), rows,
                      scratch.data()),
               Error);
}

TEST(Matmul, MatchesReferenceForEveryTypeAndTokenCount) {
  init_blas_single_threaded();
  // The token counts take both the matvec path (few tokens) and the GEMM path for
  // every type.
  const int64_t rows = 300, n = 512, ldx = n + 3, ldy = rows + 5;
  for (DType type : kAllTypes) {
    SCOPED_TRACE(dtype_name(type));
    const WeightMatrix w = quantise_matrix(type, random_normal(rows * n, 31), rows, n, 8);
    for (int64_t m : {1, 5, 40, 130}) {
      SCOPED_TRACE(m);
      const std::vector<float> x = random_normal(m * ldx, 32);
      std::vector<ReferenceDots> refs;
      for (int64_t i = 0; i < m; ++i) refs.push_back(reference_dots(w, x.data() + i * ldx));
      std::vector<float> scratch(scratch_floats_for_matmul(rows, n));
      for_each_simd_target([&](const char*) {
        std::vector<float> y(m * ldy, 777.0f);
        packed_matmul(type, w.bytes.data(), w.stride, n, rows, x.data(), ldx, m, y.data(), ldy, scratch.data());
        for (int64_t i = 0; i < m; ++i) {
          expect_close(type, y.data() + i * ldy, refs[i]);
          for (int64_t r = rows; r < ldy; ++r) ASSERT_EQ(y[i * ldy + r], 777.0f);  // row padding untouched
        }
      });
    }
  }
}

TEST(Matmul, FloatRowsOfAnyWidthPackWhole) {
  // gemm_pack_rows moves eight values of eight rows at a time on x86: rows of 1003 values
  // leave three for the value-at-a-time tail, 70 rows a short last panel.
  init_blas_single_threaded();
  const int64_t rows = 70, n = 1003, m = 40;
  for (DType type : {DType::F32, DType::F16, DType::BF16}) {
    SCOPED_TRACE(dtype_name(type));
    const WeightMatrix w = quantise_matrix(type, random_normal(rows * n, 61), rows, n, 6);
    const std::vector<float> x = random_normal(m * n, 62);
    std::vector<float> scratch(scratch_floats_for_matmul(rows, n));
    for_each_simd_target([&](const char*) {
      std::vector<float> y(m * rows);
      packed_matmul(type, w.bytes.data(), w.stride, n, rows, x.data(), n, m, y.data(), rows, scratch.data());
      for (int64_t i = 0; i < m; i += 13) expect_close(type, y.data() + i * rows, reference_dots(w, x.data() + i * n));
    });
  }
}

TEST(Matmul, DequantisedTilesCoverAllRows) {
  // Rows of 16384 values make matmul's tiles 32 rows tall (its minimum), so 300 rows
  // take 10 tiles, the last one short.
  const int64_t rows = 300, n = 16384, m = 33;
  const WeightMatrix w = quantise_matrix(DType::F16, random_normal(rows * n, 51), rows, n);
  const std::vector<float> x = random_normal(m * n, 52);
  std::vector<float> y(m * rows), scratch(scratch_floats_for_matmul(rows, n));
  packed_matmul(DType::F16, w.bytes.data(), w.stride, n, rows, x.data(), n, m, y.data(), rows, scratch.data());
  for (int64_t i = 0; i < m; i += 8) {
    expect_close(DType::F16, y.data() + i * rows, reference_dots(w, x.data() + i * n));
  }
}

TEST(Matmul, WorksOnARowRangeWithFewRows) {
  // The thread pool hands each thread a slice of rows: matmul on rows [5, 12) of a
  // larger matrix must give those rows of the full product (up to float32 summation
  // order, which BLAS may pick by shape) and leave the other columns of y alone.
  const int64_t rows = 40, n = 256, m = 10;
  for (DType type : {DType::F32, DType::Q4_K}) {
    SCOPED_TRACE(dtype_name(type));
    const WeightMatrix w = quantise_matrix(type, random_normal(rows * n, 41), rows, n);
    const std::vector<float> x = random_normal(m * n, 42);
    std::vector<float> full(m * rows), part(m * rows, 0.0f);
    std::vector<float> scratch(scratch_floats_for_matmul(rows, n));
    packed_matmul(type, w.bytes.data(), w.stride, n, rows, x.data(), n, m, full.data(), rows, scratch.data());
    packed_matmul(type, w.row(5), w.stride, n, 7, x.data(), n, m, part.data() + 5, rows, scratch.data());
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t r = 5; r < 12; ++r) {
        EXPECT_NEAR(part[i * rows + r], full[i * rows + r], 1e-5f * (1.0f + std::fabs(full[i * rows + r])));
      }
      EXPECT_EQ(part[i * rows + 4], 0.0f);
      EXPECT_EQ(part[i * rows + 12], 0.0f);
    }
  }
}

}  // namespace
}  // namespace deferkv
