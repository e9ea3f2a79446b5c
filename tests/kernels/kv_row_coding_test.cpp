// Coded rows (KvRowCoding: row = round(H (x - shift)), entry = H row + shift): the
// Walsh-Hadamard kernel against its matrix, and every reader and product over coded rows
// against the entries they decode to, computed in double here.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>

#include "kernels/hadamard.h"
#include "kernel_test_util.h"
#include "kernels/kv_rows.h"
#include "support/hadamard_matrix.h"

namespace deferkv {
namespace {

using testing::hadamard_by_definition;

// On every SIMD target (vectors of 16, 8 and 1 floats: stages within a vector and across
// vectors), and bit for bit the same floats on each.
TEST(Hadamard, IsTheOrthonormalWalshMatrixAndItsOwnInverse) {
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (const int64_t order : {8, 32, 64, 128}) {
    SCOPED_TRACE(order);
    std::vector<float> x(3 * order);  // three blocks
    for (float& v : x) v = normal(rng);
    const auto expected = hadamard_by_definition(std::vector<double>(x.begin(), x.end()), static_cast<size_t>(order));
    std::vector<float> first_target;
    testing::for_each_simd_target([&](const char*) {
      std::vector<float> y = x;
      hadamard_blocks(y.data(), static_cast<int64_t>(y.size()), order);
      for (size_t i = 0; i < x.size(); ++i) ASSERT_NEAR(y[i], expected[i], 1e-6) << i;
      if (first_target.empty()) first_target = y;
      EXPECT_EQ(y, first_target);
      hadamard_blocks(y.data(), static_cast<int64_t>(y.size()), order);
      for (size_t i = 0; i < x.size(); ++i) ASSERT_NEAR(y[i], x[i], 1e-6) << i;
    });
  }
}

TEST(Hadamard, OrderIsTheLargestPowerOfTwoThatDividesTheHead) {
  EXPECT_EQ(hadamard_order(32), 32);
  EXPECT_EQ(hadamard_order(64), 64);
  EXPECT_EQ(hadamard_order(96), 32);
  EXPECT_EQ(hadamard_order(128), 128);
  EXPECT_EQ(hadamard_order(160), 32);
  EXPECT_EQ(hadamard_order(192), 64);
}

constexpr int64_t kDim = 64;
constexpr int64_t kEntries = 300;  // more than a tile of rows at head_dim 64

struct CodedHead {
  std::vector<float> shift;
  std::vector<uint8_t> data;
  std::vector<int32_t> holes = {0, 7, 8, 150, 301};  // rows that hold no entry
  KvRows rows(DType type, bool rotated) const {
    return {data.data(), type, kDim, holes, {rotated, shift.empty() ? nullptr : shift.data()}};
  }
};

// kEntries random rows around a common offset, encoded with `coding`'s rotation and the
// head's shift, with garbage rows at the holes.
CodedHead coded_head(DType type, bool rotated, bool shifted, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  CodedHead head;
  if (shifted) {
    head.shift.resize(kDim);
    for (float& v : head.shift) v = 3.0f * normal(rng);
  }
  const int64_t bytes = dtype_row_bytes(type, kDim);
  const int64_t n_rows = kEntries + static_cast<int64_t>(head.holes.size());
  head.data.resize(static_cast<size_t>(n_rows * bytes));
  std::vector<float> x(kDim), scratch(kDim);
  const KvRows rows = head.rows(type, rotated);
  for (int64_t r = 0; r < n_rows; ++r) {
    for (int64_t i = 0; i < kDim; ++i) x[i] = (head.shift.empty() ? 0.0f : head.shift[i]) + normal(rng);
    if (std::binary_search(head.holes.begin(), head.holes.end(), static_cast<int32_t>(r))) x[0] = 1e30f;
    encode_kv_row(type, rows.coding, x.data(), kDim, scratch.data(), head.data.data() + r * bytes);
  }
  return head;
}

// Every entry as the coding defines it, in double: H (dequantised row) + shift.
std::vector<std::vector<double>> entries_by_definition(const KvRows& rows) {
  std::vector<std::vector<double>> entries;
  std::vector<float> stored(kDim);
  for (int64_t j = 0; j < kEntries; ++j) {
    rows.stored_to_f32(j, 1, stored.data());
    std::vector<double> e(stored.begin(), stored.end());
    if (rows.coding.rotated) e = hadamard_by_definition(e, kDim);  // H over the whole row
    for (int64_t i = 0; i < kDim && rows.coding.shift != nullptr; ++i) e[i] += rows.coding.shift[i];
    entries.push_back(e);
  }
  return entries;
}

struct Coding {
  DType type;
  bool rotated, shifted;
};

class CodedRows : public ::testing::TestWithParam<Coding> {};

TEST_P(CodedRows, ReadersAndProductsGiveTheDecodedEntries) {
  const Coding c = GetParam();
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const CodedHead head = coded_head(c.type, c.rotated, c.shifted, rng);
  const KvRows rows = head.rows(c.type, c.rotated);
  const auto entries = entries_by_definition(rows);

  std::vector<float> all(kEntries * kDim);
  rows.to_f32(0, kEntries, all.data());
  KvRowReader reader(rows);
  for (int64_t j = 0; j < kEntries; ++j) {
    const float* one = reader(j);
    for (int64_t i = 0; i < kDim; ++i) {
      ASSERT_NEAR(all[j * kDim + i], entries[j][i], 1e-5 * (1 + std::abs(entries[j][i]))) << j << " " << i;
      ASSERT_EQ(one[i], all[j * kDim + i]) << j << " " << i;
    }
  }

  std::vector<float> tile(kKvTileFloats);
  // 1 and 8 query rows (a decode step's group), 300 (several passes of rotated queries).
  for (const int64_t n_queries : {int64_t{1}, int64_t{8}, int64_t{300}}) {
    SCOPED_TRACE(n_queries);
    std::vector<float> queries(n_queries * kDim), probs(n_queries * kEntries);
    for (float& v : queries) v = normal(rng);
    for (float& v : probs) v = std::abs(normal(rng)) / kEntries;  // need not sum to 1
    const int64_t c0 = 5, width = kEntries - c0;
    std::vector<float> scores(n_queries * width), sums(n_queries * kDim);
    kv_key_scores(queries.data(), kDim, n_queries, rows, c0, width, scores.data(), width, tile.data());
    kv_weighted_values(probs.data(), kEntries, n_queries, rows, kEntries, sums.data(), kDim, tile.data());
    for (int64_t r = 0; r < n_queries; ++r) {
      const float* q = queries.data() + r * kDim;
      for (int64_t j = 0; j < width; ++j) {
        double dot = 0, size = 0;
        for (int64_t i = 0; i < kDim; ++i) dot += q[i] * entries[c0 + j][i], size += std::abs(q[i] * entries[c0 + j][i]);
        ASSERT_NEAR(scores[r * width + j], dot, 1e-5 * size) << "query " << r << " key " << c0 + j;
      }
      for (int64_t i = 0; i < kDim; ++i) {
        double sum = 0, size = 0;
        for (int64_t j = 0; j < kEntries; ++j) {
          sum += probs[r * kEntries + j] * entries[j][i];
          size += std::abs(probs[r * kEntries + j] * entries[j][i]);
        }
        ASSERT_NEAR(sums[r * kDim + i], sum, 1e-5 * size) << "query " << r << " dim " << i;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Codings, CodedRows,
                         ::testing::Values(Coding{DType::Q8_0, true, true}, Coding{DType::Q8_0, true, false},
                                           Coding{DType::Q4_0, true, true}, Coding{DType::Q8_0, false, true},
                                           Coding{DType::F16, false, true}, Coding{DType::F32, true, true}),
                         [](const auto& info) {
                           return std::string(dtype_name(info.param.type)) + (info.param.rotated ? "_rotated" : "") +
                                  (info.param.shifted ? "_shifted" : "");
                         });

}  // namespace
}  // namespace deferkv
