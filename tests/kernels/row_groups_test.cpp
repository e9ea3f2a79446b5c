// Row groups (row_groups.h): the layout round-trips every byte of the GGUF rows, and the
// matvec over groups (its SIMD kernels on every x86 target, the portable code under the
// scalar cap) gives float64's dot of the dequantised weights with the int8-quantised
// activation up to float rounding, the same bits on every target and for any number of
// activations, and leaves y's other rows alone.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "deferkv/error.h"
#include "kernel_test_util.h"
#include "kernels/packed_activation.h"
#include "kernels/quant_blocks.h"
#include "kernels/row_groups.h"

namespace deferkv {
namespace {

using testing::quantise_matrix;
using testing::random_normal;
using testing::WeightMatrix;

const DType kGroupedTypes[] = {DType::Q4_0, DType::Q4_K};

template <class Check>
void for_each_row_groups_target(const Check& check) {
#if HWY_ARCH_X86
  testing::for_each_simd_target_in({HWY_AVX3_DL, HWY_AVX3, HWY_AVX2, HWY_SCALAR}, check);
#else
  testing::for_each_simd_target(check);
#endif
}

// The test's own int8 quantisation in blocks of `block` (packed_activation.h): the
// dequantised activation d_b * q_i.
std::vector<double> int8_dequantised(const float* x, int64_t n, int block) {
  std::vector<double> out(static_cast<size_t>(n));
  for (int64_t b = 0; b < n / block; ++b) {
    float amax = 0.0f;
    for (int64_t i = 0; i < block; ++i) amax = std::fmax(amax, std::fabs(x[b * block + i]));
    const float d = amax / 127.0f;
    const float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
    for (int64_t i = 0; i < block; ++i) {
      out[b * block + i] = static_cast<double>(d) * std::nearbyint(x[b * block + i] * inv);
    }
  }
  return out;
}

std::vector<unsigned char> grouped(const WeightMatrix& w) {
  std::vector<unsigned char> groups(row_group_bytes(w.type, w.n) * static_cast<size_t>(w.rows / kGroupRows));
  group_rows(w.type, w.bytes.data(), w.stride, w.n, w.rows, groups.data());
  return groups;
}

TEST(RowGroups, UngroupGivesBackEveryByte) {
  // Random bytes, not quantised values: every bit of a block (the packed six-bit scales
  // included) must come back, whatever a file holds.
  std::mt19937 rng(11);
  for (DType type : kGroupedTypes) {
    SCOPED_TRACE(dtype_name(type));
    const int64_t rows = 24, n = 512;
    WeightMatrix w{type, rows, n, static_cast<size_t>(dtype_row_bytes(type, n)) + 8, {}};
    w.bytes.resize(w.stride * rows);
    for (auto& byte : w.bytes) byte = static_cast<unsigned char>(rng());
    const std::vector<unsigned char> groups = grouped(w);
    // Rows 5 .. 21: a start and an end inside groups.
    std::vector<unsigned char> back(w.stride * rows, 0);
    ungroup_rows(type, groups.data(), n, 5, 17, back.data() + 5 * w.stride, w.stride);
    for (int64_t r = 5; r < 22; ++r) {
      ASSERT_EQ(std::memcmp(back.data() + r * w.stride, w.row(r), dtype_row_bytes(type, n)), 0) << "row " << r;
    }
  }
}

// matvec_row_groups with 1..9 activations on 40 rows (a tile of four groups and one more)
// of n values against float64, against the portable code bit for bit, and against one
// activation at a time.
void check_matvec(DType type, const WeightMatrix& w, const std::vector<float>& x, int64_t max_m) {
  const int64_t rows = w.rows, n = w.n, ldy = rows + 5;
  const int block = static_cast<int>(dtype_block_elems(type));
  const std::vector<unsigned char> groups = grouped(w);
  const size_t stride = row_groups_activation_stride(type, n) + 64;
  ASSERT_EQ(row_groups_activation_bytes(type, n), packed_layout_int8(n, block).total);
  std::vector<unsigned char> packed(stride * max_m);
  for (int64_t i = 0; i < max_m; ++i) pack_row_groups_activation(type, x.data() + i * n, n, packed.data() + i * stride);

  // Per activation and row: the dot with the quantised activation and the float rounding's scale.
  std::vector<double> exact(max_m * rows), scale(max_m * rows);
  std::vector<float> wr(n);
  for (int64_t i = 0; i < max_m; ++i) {
    const std::vector<double> xq = int8_dequantised(x.data() + i * n, n, block);
    for (int64_t r = 0; r < rows; ++r) {
      dequantize_row(type, w.row(r), wr.data(), n);
      for (int64_t j = 0; j < n; ++j) {
        exact[i * rows + r] += wr[j] * xq[j];
        // Q4_K's values are d * sc * q - dmin * m, each term rounded on its own.
        scale[i * rows + r] += std::fabs(wr[j] * xq[j]) + std::fabs(wr[j]) * std::fabs(xq[j]) + std::fabs(xq[j]);
      }
    }
  }
  std::vector<float> portable(max_m * ldy, 777.0f);
  matvec_row_groups_portable(type, groups.data(), n, packed.data(), stride, max_m, portable.data(), ldy, rows);
  for_each_row_groups_target([&](const char*) {
    std::vector<float> alone(max_m * rows);
    for (int64_t i = 0; i < max_m; ++i) {
      matvec_row_groups(type, groups.data(), n, packed.data() + i * stride, stride, 1, alone.data() + i * rows, rows,
                        rows);
    }
    for (int64_t m = 1; m <= max_m; ++m) {
      SCOPED_TRACE(m);
      std::vector<float> y(m * ldy, 777.0f);
      matvec_row_groups(type, groups.data(), n, packed.data(), stride, m, y.data(), ldy, rows);
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t r = 0; r < rows; ++r) {
          const float got = y[i * ldy + r];
          const size_t k = i * rows + r;
          ASSERT_EQ(std::bit_cast<uint32_t>(got), std::bit_cast<uint32_t>(alone[k])) << "x " << i << " row " << r;
          ASSERT_EQ(std::bit_cast<uint32_t>(got), std::bit_cast<uint32_t>(portable[i * ldy + r]))
              << "x " << i << " row " << r;
          ASSERT_LE(std::fabs(got - exact[k]), 1e-5 * scale[k]) << "x " << i << " row " << r << ": " << got;
        }
        for (int64_t r = rows; r < ldy; ++r) ASSERT_EQ(y[i * ldy + r], 777.0f);
      }
    }
  });
}

std::vector<float> activations(int64_t n, int64_t m, uint32_t seed) {
  std::vector<float> x = random_normal(n * m, seed);
  // A huge, a zero and a tiny block in the first activation.
  for (int64_t i = 0; i < 256; ++i) {
    x[256 + i] *= 1e4f;
    x[512 + i] = 0.0f;
    x[768 + i] *= 1e-4f;
  }
  return x;
}

TEST(RowGroups, MatvecMatchesTheQuantisedActivationOnEveryTarget) {
  const int64_t rows = 40, n = 1280, m = 9;
  for (DType type : kGroupedTypes) {
    SCOPED_TRACE(dtype_name(type));
    check_matvec(type, quantise_matrix(type, random_normal(rows * n, 31), rows, n, 24), activations(n, m, 32), m);
  }
}

TEST(RowGroups, LargestValuesDoNotSaturate) {
  // Every nibble 15 and every scale 63 against activations of +127 (and of -127): the
  // int16 sums of a sub-block reach 8 * 2 * 15 * 127 = 30480 of 32767.
  const int64_t rows = 16, n = 512;
  for (DType type : kGroupedTypes) {
    SCOPED_TRACE(dtype_name(type));
    WeightMatrix w{type, rows, n, static_cast<size_t>(dtype_row_bytes(type, n)), {}};
    w.bytes.assign(w.stride * rows, 0xff);
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t b = 0; b < n / dtype_block_elems(type); ++b) {
        if (type == DType::Q4_0) {
          reinterpret_cast<BlockQ4_0*>(w.bytes.data() + r * w.stride)[b].d = 0x3c00;  // 1.0
        } else {
          auto& block = reinterpret_cast<BlockQ4_K*>(w.bytes.data() + r * w.stride)[b];
          block.d = 0x3c00;
          block.dmin = 0x3800;  // 0.5
        }
      }
    }
    std::vector<float> x(n * 2, 1.0f);
    for (int64_t i = n; i < 2 * n; ++i) x[i] = -1.0f;
    check_matvec(type, w, x, 2);
  }
}

TEST(RowGroups, LayoutSettingParsesItsNames) {
  EXPECT_EQ(parse_weight_layout("gguf"), WeightLayout::kGgufRows);
  EXPECT_EQ(parse_weight_layout("Row-Groups"), WeightLayout::kRowGroups);
  try {
    parse_weight_layout("interleaved");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("DEFERKV_WEIGHT_LAYOUT='interleaved'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("gguf, row-groups"), std::string::npos) << e.what();
  }
}

TEST(RowGroups, GroupsOnlyWholeGroupsOfItsTypes) {
  const WeightLayout previous = weight_layout();
  set_weight_layout(WeightLayout::kRowGroups);
  EXPECT_TRUE(groups_rows(DType::Q4_K, 256));
  EXPECT_TRUE(groups_rows(DType::Q4_0, 8));
  EXPECT_FALSE(groups_rows(DType::Q4_K, 12));  // not whole groups
  EXPECT_FALSE(groups_rows(DType::Q8_0, 256));
  set_weight_layout(WeightLayout::kGgufRows);
  EXPECT_FALSE(groups_rows(DType::Q4_K, 256));
  set_weight_layout(previous);
}

}  // namespace
}  // namespace deferkv
