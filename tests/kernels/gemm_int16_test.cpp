// gemm_int16 against float64 dot products of what it multiplies: the dequantised weights
// and the tokens as pack_activation quantises them. Its int32 block sums are exact, so the
// only rounding left is the float32 scaling and summing of blocks. Run on every target it
// is built for (AVX-512 with and without VNNI, AVX2).
#include <gtest/gtest.h>

#include <algorithm>
#include <iterator>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "deferkv/error.h"
#include "kernel_test_util.h"
#include "kernels/gemm_int16.h"
#include "kernels/matvec.h"
#include "kernels/matvec_kernels.h"
#include "kernels/packed_activation.h"
#include "kernels/quant.h"

namespace deferkv {
namespace {

using testing::quantise_matrix;
using testing::random_normal;
using testing::reference_dots;
using testing::WeightMatrix;

constexpr DType kIntegerTypes[] = {DType::Q8_0, DType::Q4_0, DType::Q4_K, DType::Q5_K, DType::Q6_K};

// Token i as gemm_int16 multiplies it on the target now: quantised to int16 blocks, or to
// int8 where gemm_int16_takes_int8, then read back.
std::vector<float> as_packed(DType type, const float* x, int64_t n) {
  std::vector<float> out(static_cast<size_t>(n));
  if (type == DType::BF16) {  // rounded to bf16
    for (int64_t k = 0; k < n; ++k) out[k] = bf16_to_fp32(fp32_to_bf16(x[k]));
    return out;
  }
  if (gemm_int16_takes_int8(type) && type == DType::Q4_0) {  // int8 blocks of 32
    for (int64_t b = 0; b < n / 32; ++b) {
      float amax = 0.0f;
      for (int64_t i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[b * 32 + i]));
      const float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
      for (int64_t i = 0; i < 32; ++i) out[b * 32 + i] = std::nearbyint(x[b * 32 + i] * inv) * (amax / 127.0f);
    }
    return out;
  }
  if (gemm_int16_takes_int8(type)) {
    std::vector<unsigned char> packed(packed_layout_int8(n).total);
    pack_int8_blocks(x, n, packed.data());
    const PackedActivationInt8 view = packed_view_int8(packed.data(), n);
    for (int64_t k = 0; k < n; ++k) out[k] = static_cast<float>(view.q[k]) * view.d[k / 256];
    return out;
  }
  // The int16 blocks gemm_int16 packs itself (pack_activation gives K-quants the int8 form
  // under KQuantActivation::kInt8).
  const int block = static_cast<int>(dtype_block_elems(type));
  std::vector<unsigned char> packed(packed_layout(n, block).total);
  pack_int16_blocks(x, n, block, packed.data());
  const PackedActivation view = packed_view(packed.data(), n, block);
  for (int64_t k = 0; k < n; ++k) out[k] = static_cast<float>(view.q[k]) * view.d[k / block];
  return out;
}

// y = gemm_int16 of rows [r0, r1) of w with tokens [0, m) of x, into y[i * ldy + r].
void run(const WeightMatrix& w, const std::vector<float>& x, int64_t m, int64_t r0, int64_t r1, float* y,
         int64_t ldy) {
  std::vector<unsigned char> tokens(gemm_int16_tokens_bytes(w.type, w.n, m));
  const int64_t t = gemm_int16_panel_tokens();
  gemm_int16_pack_tokens(w.type, x.data(), w.n, w.n, m, 0, (m + t - 1) / t, tokens.data());
  std::vector<unsigned char> scratch(gemm_int16_scratch_bytes(w.type, w.n));
  gemm_int16(w.type, w.row(r0), w.stride, w.n, r1 - r0, tokens.data(), m, y + r0, ldy, scratch.data());
}

// The targets gemm_int16 is built for that this CPU has, each forced in turn.
template <class Check>
void for_each_integer_target(const Check& check) {
  testing::for_each_simd_target({int64_t{HWY_AVX3_DL}, int64_t{HWY_AVX3}, int64_t{HWY_AVX2}},
                                [&](const char*) { check(); });
}

struct Shape {
  int64_t rows, n, m;
};

// The types gemm_int16 runs on the target now: the integer ones, and BF16 where the CPU has
// AVX-512 BF16 and the target is AVX-512 (n = 96 has no block of 64, so the bf16 sums go by
// blocks of 32 there).
std::vector<DType> types_run_here() {
  std::vector<DType> types(std::begin(kIntegerTypes), std::end(kIntegerTypes));
  if (gemm_int16_serves(DType::BF16, 96, 32)) types.push_back(DType::BF16);
  return types;
}

TEST(GemmInt16, MatchesFloat64OfTheQuantisedOperands) {
  // Partial row tiles, partial token panels, several weight tiles (768 columns: 84 rows),
  // and enough tokens that the values are taken in chunks (600 tokens: 3 blocks of 256).
  const Shape shapes[] = {{1, 256, 1}, {7, 256, 33}, {45, 768, 70}, {200, 512, 19}, {13, 1024, 600}};
  for (DType type : {DType::Q8_0, DType::Q4_0, DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::BF16}) {
    for (const Shape& s : shapes) {
      SCOPED_TRACE(::testing::Message() << dtype_name(type) << " rows " << s.rows << " n " << s.n << " m " << s.m);
      // Offsets per row so that the mins are far from zero.
      std::vector<float> values = random_normal(static_cast<size_t>(s.rows * s.n), 11);
      for (int64_t r = 0; r < s.rows; ++r) {
        for (int64_t k = 0; k < s.n; ++k) values[r * s.n + k] += 0.5f * static_cast<float>(r % 5) - 1.0f;
      }
      const WeightMatrix w = quantise_matrix(type, values, s.rows, s.n);
      const std::vector<float> x = random_normal(static_cast<size_t>(s.m * s.n), 12, 3.0f);
      for_each_integer_target([&] {
        const std::vector<DType> here = types_run_here();
        if (std::find(here.begin(), here.end(), type) == here.end()) return;
        std::vector<float> y(static_cast<size_t>(s.m * s.rows), NAN);
        run(w, x, s.m, 0, s.rows, y.data(), s.rows);
        for (int64_t i = 0; i < s.m; ++i) {
          const std::vector<float> xi = as_packed(type, x.data() + i * s.n, s.n);
          const auto ref = reference_dots(w, xi.data());
          for (int64_t r = 0; r < s.rows; ++r) {
            ASSERT_NEAR(y[i * s.rows + r], ref.dot[r], 1e-5 * ref.magnitude[r]) << "token " << i << " row " << r;
          }
        }
      });
    }
  }
}

// Every value at its type's largest magnitude against tokens at the int8 and int16 forms'
// largest: the int32 sums, and the int8 kernel's int16 sums of a few steps, must not
// saturate (a kernel summing a whole Q5_K sub-block in int16 fails here).
TEST(GemmInt16, LargestValuesAgainstLargestTokensDoNotOverflow) {
  const int64_t rows = 8, n = 512, m = 20;
  for (DType type : kIntegerTypes) {
    SCOPED_TRACE(dtype_name(type));
    WeightMatrix w = quantise_matrix(type, random_normal(static_cast<size_t>(rows * n), 31), rows, n);
    // Every value byte set (Q4_0/Q8_0 blocks start with their fp16 scale, K-quant blocks end
    // with qs): the largest nibble, Q5_K's fifth bit, Q6_K's top bits; the largest scales too.
    for (int64_t r = 0; r < rows; ++r) {
      unsigned char* row = w.bytes.data() + r * w.stride;
      const size_t block_bytes = dtype_row_bytes(type, dtype_block_elems(type));
      for (size_t at = 0; at < static_cast<size_t>(dtype_row_bytes(type, n)); at += block_bytes) {
        // Past d (and dmin), which lead every block but Q6_K's (ql, qh, scales, d).
        const size_t values_from = type == DType::Q6_K ? 0 : type == DType::Q4_0 || type == DType::Q8_0 ? 2 : 4;
        const size_t values_to = type == DType::Q6_K ? block_bytes - 2 : block_bytes;
        for (size_t i = values_from; i < values_to; ++i) {
          if (type == DType::Q8_0) {
            row[at + i] = 0x81;  // -127
          } else if (type == DType::Q6_K && i >= 192) {
            row[at + i] = 0x7f;  // its int8 scales: 127
          } else {
            row[at + i] = 0xff;  // nibbles 15, fifth and sixth bits, six-bit scales and mins 63
          }
        }
      }
    }
    std::vector<float> x(static_cast<size_t>(m * n));
    for (size_t i = 0; i < x.size(); ++i) x[i] = (i / n) % 2 == 0 ? 1.0f : -1.0f;  // every q at +-qmax
    for_each_integer_target([&] {
      std::vector<float> y(static_cast<size_t>(m * rows), NAN);
      run(w, x, m, 0, rows, y.data(), rows);
      for (int64_t i = 0; i < m; ++i) {
        const std::vector<float> xi = as_packed(type, x.data() + i * n, n);
        const auto ref = reference_dots(w, xi.data());
        for (int64_t r = 0; r < rows; ++r) {
          ASSERT_NEAR(y[i * rows + r], ref.dot[r], 1e-5 * ref.magnitude[r]) << "token " << i << " row " << r;
        }
      }
    });
  }
}

// The K-quants and Q4_0 take int8 tokens on AVX2 (the byte kernel), unless the K-quant
// setting asks for int16; Q8_0 and the AVX-512 targets take int16.
TEST(GemmInt16, TakesInt8TokensForKQuantsAndQ4_0OnAvx2) {
  for_each_integer_target([&] {
    const bool avx2 = std::strcmp(gemm_int16_target(), hwy::TargetName(HWY_AVX2)) == 0;
    for (DType type : kIntegerTypes) {
      const bool bytes = type != DType::Q8_0;
      EXPECT_EQ(avx2 && bytes, gemm_int16_takes_int8(type))
          << dtype_name(type);
    }
    set_kquant_activation(KQuantActivation::kInt16);
    EXPECT_FALSE(gemm_int16_takes_int8(DType::Q4_K));
    EXPECT_FALSE(gemm_int16_takes_int8(DType::Q6_K));
    set_kquant_activation(KQuantActivation::kInt8);
  });
}

TEST(GemmInt16, EachValueIsTheSameWhateverTheTokensOrRowsBesideIt) {
  // 600 tokens of 1024 values are taken in chunks of values; one token alone is not.
  const int64_t rows = 50, n = 1024, m = 600;
  for (DType type : {DType::Q8_0, DType::Q4_0, DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::BF16}) {
    SCOPED_TRACE(dtype_name(type));
    const WeightMatrix w = quantise_matrix(type, random_normal(static_cast<size_t>(rows * n), 21), rows, n);
    const std::vector<float> x = random_normal(static_cast<size_t>(m * n), 22);
    for_each_integer_target([&] {
      const std::vector<DType> here = types_run_here();
      if (std::find(here.begin(), here.end(), type) == here.end()) return;
      std::vector<float> all(static_cast<size_t>(m * rows));
      run(w, x, m, 0, rows, all.data(), rows);
      // Rows in two uneven parts, as threads split them.
      std::vector<float> split(all.size(), NAN);
      run(w, x, m, 0, 17, split.data(), rows);
      run(w, x, m, 17, rows, split.data(), rows);
      EXPECT_EQ(0, std::memcmp(all.data(), split.data(), all.size() * sizeof(float)));
      // Each token alone.
      for (int64_t i = 0; i < m; i += 37) {
        const std::vector<float> xi(x.begin() + i * n, x.begin() + (i + 1) * n);
        std::vector<float> alone(static_cast<size_t>(rows));
        run(w, xi, 1, 0, rows, alone.data(), rows);
        EXPECT_EQ(0, std::memcmp(alone.data(), all.data() + i * rows, alone.size() * sizeof(float))) << "token " << i;
      }
    });
  }
}

TEST(GemmInt16, ServesItsTypesFromItsThreshold) {
  // What the kernel's own dispatch runs (its targets are not every kernel's: under
  // DEFERKV_MAX_SIMD=scalar it may still run its AVX3_DL or the static target).
  const std::string target = gemm_int16_target();
  const bool x86_simd = target == "AVX2" || target.rfind("AVX3", 0) == 0;
  EXPECT_FALSE(gemm_int16_serves(DType::Q4_K, 256, 15));
  // Q8_0 on AVX2 takes matmul's float32 GEMM instead (gemm_int16.cpp's Serves says why).
  for (DType type : kIntegerTypes) {
    const bool served = x86_simd && !(type == DType::Q8_0 && target == "AVX2");
    EXPECT_EQ(served, gemm_int16_serves(type, 256, 16)) << dtype_name(type) << " on " << target;
  }
  for (DType type : {DType::F32, DType::F16}) EXPECT_FALSE(gemm_int16_serves(type, 256, 512));
}

// BF16 weights from 32 tokens of a multiple of 32 values, where the CPU has AVX-512 BF16
// and the dispatched target is AVX-512; never under DEFERKV_BF16_ACTIVATION=f32.
TEST(GemmInt16, ServesBf16WhereTheCpuHasIt) {
#if HWY_ARCH_X86
  const bool cpu = __builtin_cpu_supports("avx512bf16") != 0;
#else
  const bool cpu = false;
#endif
  for_each_integer_target([&] {
    const bool avx512 = std::strncmp(gemm_int16_target(), "AVX3", 4) == 0;
    EXPECT_EQ(cpu && avx512, gemm_int16_serves(DType::BF16, 256, 32));
    EXPECT_FALSE(gemm_int16_serves(DType::BF16, 256, 31));
    EXPECT_FALSE(gemm_int16_serves(DType::BF16, 48, 512));
    set_bf16_activation(Bf16Activation::kF32);
    EXPECT_FALSE(gemm_int16_serves(DType::BF16, 256, 512));
    set_bf16_activation(Bf16Activation::kBf16);
  });
  EXPECT_EQ(parse_bf16_activation("F32"), Bf16Activation::kF32);
  try {
    parse_bf16_activation("fp16");
    FAIL() << "fp16 accepted";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("DEFERKV_BF16_ACTIVATION='fp16'"), std::string::npos) << message;
    EXPECT_NE(message.find("bf16, f32"), std::string::npos) << message;
  }
}

}  // namespace
}  // namespace deferkv
