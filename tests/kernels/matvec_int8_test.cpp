// The int8 form of the activation for K-quant weights (KQuantActivation::kInt8,
// packed_activation.h) and the Q4_K, Q5_K and Q6_K kernels on it (matvec_k4_int8.cpp,
// matvec_q6_k.cpp), on every target they are built for (AVX3_DL's VNNI path included): the packing against the test's own
// quantisation, the kernel against float64 dot products of the dequantised weights with
// the int8-quantised activation (equal up to float rounding, since the kernel's block sums
// are exact integers) and with the float activation (within the quantisation's bound).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "deferkv/error.h"
#include "kernel_test_util.h"
#include "kernels/matvec.h"
#include "kernels/packed_activation.h"

namespace deferkv {
namespace {

using testing::quantise_matrix;
using testing::random_normal;
using testing::WeightMatrix;

// The targets the int8 kernels are built for, each path of it: VNNI, AVX-512, AVX2,
// and the portable one; on aarch64 all of its targets (NEON is its fallback there).
template <class Check>
void for_each_int8_target(const Check& check) {
#if HWY_ARCH_X86
  testing::for_each_simd_target_in({HWY_AVX3_DL, HWY_AVX3, HWY_AVX2, HWY_SCALAR}, check);
#else
  testing::for_each_simd_target(check);
#endif
}

// Sets the form for one test and restores what it was.
class KQuantInt8 : public ::testing::Test {
 protected:
  void SetUp() override {
    previous_ = kquant_activation();
    set_kquant_activation(KQuantActivation::kInt8);
  }
  void TearDown() override { set_kquant_activation(previous_); }

 private:
  KQuantActivation previous_ = KQuantActivation::kInt8;
};

// The test's own int8 quantisation, as packed_activation.h specifies it.
struct Int8Blocks {
  std::vector<float> d;
  std::vector<int8_t> q;
  std::vector<int16_t> sums;
  std::vector<int16_t> sums16;
};

Int8Blocks quantise_int8(const float* x, int64_t n) {
  Int8Blocks out;
  for (int64_t b = 0; b < n / 256; ++b) {
    float amax = 0.0f;
    for (int64_t i = 0; i < 256; ++i) amax = std::fmax(amax, std::fabs(x[b * 256 + i]));
    out.d.push_back(amax / 127.0f);
    const float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
    for (int64_t i = 0; i < 256; ++i) out.q.push_back(static_cast<int8_t>(std::nearbyint(x[b * 256 + i] * inv)));
  }
  for (int64_t s = 0; s < n / 32; ++s) {
    int sum = 0;
    for (int64_t i = 0; i < 32; ++i) sum += out.q[s * 32 + i];
    out.sums.push_back(static_cast<int16_t>(sum));
  }
  for (int64_t s = 0; s < n / 16; ++s) {
    int sum = 0;
    for (int64_t i = 0; i < 16; ++i) sum += out.q[s * 16 + i];
    out.sums16.push_back(static_cast<int16_t>(sum));
  }
  return out;
}

// Activations with a huge, a zero and a tiny 256-block among normal ones.
std::vector<float> activation(int64_t n, uint32_t seed) {
  std::vector<float> x = random_normal(n, seed);
  for (int64_t i = 0; i < 256 && n >= 1024; ++i) {
    x[256 + i] *= 1e4f;
    x[512 + i] = 0.0f;
    x[768 + i] *= 1e-4f;
  }
  return x;
}

TEST_F(KQuantInt8, PacksTheSpecifiedBlocks) {
  const int64_t n = 1280;
  const std::vector<float> x = activation(n, 5);
  const Int8Blocks want = quantise_int8(x.data(), n);
  ASSERT_EQ(packed_activation_bytes(DType::Q4_K, n), packed_layout_int8(n).total);
  for_each_int8_target([&](const char*) {
    std::vector<unsigned char> packed(packed_activation_bytes(DType::Q4_K, n), 0xa5);
    pack_activation(DType::Q4_K, x.data(), n, packed.data());
    const PackedActivationInt8 view = packed_view_int8(packed.data(), n);
    for (int64_t b = 0; b < n / 256; ++b) ASSERT_EQ(view.d[b], want.d[b]) << "block " << b;
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(view.q[i], want.q[i]) << "value " << i;
    for (int64_t s = 0; s < n / 32; ++s) ASSERT_EQ(view.sums[s], want.sums[s]) << "sum " << s;
    for (int64_t s = 0; s < n / 16; ++s) ASSERT_EQ(view.sums16[s], want.sums16[s]) << "sum16 " << s;
  });
}

// matvec_rows with 1..9 activations (groups of 4 and every remainder) on `rows` rows (tiles of
// 16 and a short one) of n values, each output against both references, and bit for bit
// what matvec gives for its activation alone.
void check_int8(DType type, int64_t rows, int64_t n) {
  SCOPED_TRACE(dtype_name(type));
  SCOPED_TRACE(n);
  ASSERT_TRUE(takes_int8_activation(type));
  const WeightMatrix w = quantise_matrix(type, random_normal(rows * n, 71), rows, n, 24);
  const int64_t max_m = 9, ldy = rows + 3;
  const size_t stride = packed_activation_stride(type, n) + 64;
  std::vector<float> x;
  for (int64_t i = 0; i < max_m; ++i) {
    const std::vector<float> xi = activation(n, 72 + static_cast<uint32_t>(i));
    x.insert(x.end(), xi.begin(), xi.end());
  }
  std::vector<unsigned char> packed(stride * max_m);
  for (int64_t i = 0; i < max_m; ++i) pack_activation(type, x.data() + i * n, n, packed.data() + i * stride);

  // Per activation and row: dot with the quantised activation, its float rounding scale
  // (sum |w_i xq_i| plus the min terms' size), the dot with x, and the bound
  // sum |w_i| d_b / 2 on what quantising x to int8 can change.
  std::vector<double> exact(max_m * rows), scale(max_m * rows), with_x(max_m * rows), bound(max_m * rows);
  std::vector<float> wr(n);
  for (int64_t r = 0; r < rows; ++r) {
    dequantize_row(type, w.row(r), wr.data(), n);
    for (int64_t i = 0; i < max_m; ++i) {
      const float* xi = x.data() + i * n;
      const Int8Blocks q = quantise_int8(xi, n);
      const size_t k = i * rows + r;
      for (int64_t j = 0; j < n; ++j) {
        const double xq = static_cast<double>(q.q[j]) * q.d[j / 256];
        exact[k] += wr[j] * xq;
        scale[k] += std::fabs(wr[j] * xq) + std::fabs(wr[j]) * std::fabs(xq);
        with_x[k] += static_cast<double>(wr[j]) * xi[j];
        bound[k] += std::fabs(wr[j]) * q.d[j / 256] / 2;
      }
    }
  }
  for_each_int8_target([&](const char*) {
    std::vector<float> alone(max_m * rows);
    for (int64_t i = 0; i < max_m; ++i) {
      matvec(type, w.bytes.data(), w.stride, n, packed.data() + i * stride, alone.data() + i * rows, rows);
    }
    for (int64_t m = 1; m <= max_m; ++m) {
      SCOPED_TRACE(m);
      std::vector<float> y(m * ldy, 777.0f);
      matvec_rows(type, w.bytes.data(), w.stride, n, packed.data(), stride, m, y.data(), ldy, rows);
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t r = 0; r < rows; ++r) {
          const float got = y[i * ldy + r];
          const size_t k = i * rows + r;
          ASSERT_EQ(std::bit_cast<uint32_t>(got), std::bit_cast<uint32_t>(alone[k])) << "x " << i << " row " << r;
          ASSERT_LE(std::fabs(got - exact[k]), 1e-5 * scale[k]) << "x " << i << " row " << r << ": " << got;
          ASSERT_LE(std::fabs(got - with_x[k]), bound[k] + 1e-5 * scale[k]) << "x " << i << " row " << r;
        }
        for (int64_t r = rows; r < ldy; ++r) ASSERT_EQ(y[i * ldy + r], 777.0f);  // y's padding untouched
      }
    }
  });
}

TEST_F(KQuantInt8, Q4KMatchesTheQuantisedActivationOnEveryTarget) {
  check_int8(DType::Q4_K, 37, 1280);  // five blocks: an odd count, so MatvecByBlocks' last block is alone
  check_int8(DType::Q4_K, 5, 256);    // one block, one short tile
}

TEST_F(KQuantInt8, Q5KMatchesTheQuantisedActivationOnEveryTarget) {
  check_int8(DType::Q5_K, 37, 1280);
  check_int8(DType::Q5_K, 5, 256);
}

TEST_F(KQuantInt8, Q6KMatchesTheQuantisedActivationOnEveryTarget) {
  check_int8(DType::Q6_K, 37, 1280);
  check_int8(DType::Q6_K, 5, 256);
}

TEST_F(KQuantInt8, Int16FormStaysSelectable) {
  // The int16 form (DEFERKV_KQUANT_ACTIVATION=int16) packs 256-blocks of int16 and runs the
  // int16 kernels, within their own (tighter) error of the float reference.
  set_kquant_activation(KQuantActivation::kInt16);
  const int64_t rows = 21, n = 1024;
  for (DType type : {DType::Q4_K, DType::Q5_K, DType::Q6_K}) {
    SCOPED_TRACE(dtype_name(type));
    ASSERT_FALSE(takes_int8_activation(type));
    ASSERT_EQ(packed_activation_bytes(type, n), packed_layout(n, 256).total);
    const WeightMatrix w = quantise_matrix(type, random_normal(rows * n, 81), rows, n);
    const std::vector<float> x = random_normal(n, 82);
    const testing::ReferenceDots ref = testing::reference_dots(w, x.data());
    std::vector<unsigned char> packed(packed_activation_bytes(type, n));
    pack_activation(type, x.data(), n, packed.data());
    std::vector<float> y(rows);
    matvec(type, w.bytes.data(), w.stride, n, packed.data(), y.data(), rows);
    for (int64_t r = 0; r < rows; ++r) ASSERT_LE(std::fabs(y[r] - ref.dot[r]), 2e-3 * ref.magnitude[r]) << r;
    // About 8e-4 with int16 activations, 7e-3 with int8 ones: this is the int16 form.
    EXPECT_LT(testing::relative_error(y.data(), ref.dot), 2e-3);
  }
}

TEST(KQuantActivationSetting, ParsesTheNamesAndRefusesOthers) {
  EXPECT_EQ(parse_kquant_activation("int8"), KQuantActivation::kInt8);
  EXPECT_EQ(parse_kquant_activation("INT16"), KQuantActivation::kInt16);
  try {
    parse_kquant_activation("int4");
    FAIL() << "int4 accepted";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("DEFERKV_KQUANT_ACTIVATION='int4'"), std::string::npos) << message;
    EXPECT_NE(message.find("int16, int8"), std::string::npos) << message;
  }
}

}  // namespace
}  // namespace deferkv
