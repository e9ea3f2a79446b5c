// Rows with holes (KvRows::holes, left by KvCache::erase_lazily): every reader sees the
// entries between the holes, in order, and the products give the same floats as over the
// same entries stored contiguously. The reference is that contiguous copy, so the test
// compares bit for bit (f32 values excepted: with holes they go through the tile path,
// whose sums are grouped otherwise than the one GEMM over contiguous rows).
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>

#include "kernels/kv_rows.h"
#include "kernels/quant.h"

namespace deferkv {
namespace {

constexpr int64_t kEntries = 300;

struct Stored {
  std::vector<uint8_t> with_holes, compact;
  std::vector<int32_t> holes;
};

// kEntries random rows of `type`, stored once contiguously and once with `holes`
// (ascending row indices, garbage rows) between them.
Stored store(DType type, int64_t d, const std::vector<int32_t>& holes, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const int64_t bytes = dtype_row_bytes(type, d);
  const auto n_rows = kEntries + static_cast<int64_t>(holes.size());
  Stored s{std::vector<uint8_t>(static_cast<size_t>(n_rows * bytes)), std::vector<uint8_t>(static_cast<size_t>(kEntries * bytes)),
           holes};
  std::vector<float> x(static_cast<size_t>(d));
  size_t hole = 0;
  for (int64_t row = 0, entry = 0; row < n_rows; ++row) {
    for (float& v : x) v = normal(rng);
    x[0] = hole < holes.size() && holes[hole] == row ? 1e30f : x[0];  // a hole poisons any sum it enters
    quantize_row(type, x.data(), s.with_holes.data() + row * bytes, d);
    if (hole < holes.size() && holes[hole] == row) {
      ++hole;
      continue;
    }
    std::memcpy(s.compact.data() + entry * bytes, s.with_holes.data() + row * bytes, static_cast<size_t>(bytes));
    ++entry;
  }
  return s;
}

bool same_floats(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

class KvRowsHoles : public ::testing::TestWithParam<DType> {};

TEST_P(KvRowsHoles, ReadersSeeTheEntriesAndProductsMatchTheContiguousRows) {
  const DType type = GetParam();
  std::mt19937 rng(17);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
  // Holes first, last, in a run, and scattered (a tile of the tile path holds 256 rows).
  const std::vector<std::vector<int32_t>> layouts = {
      {0}, {5, 6, 7, 8}, {0, 1, 120, 255, 256, 257, 299, 301, 302}, {150}};
  for (const std::vector<int32_t>& holes : layouts) {
    const bool blocks = type == DType::Q8_0 || type == DType::Q4_0;  // head_dim in blocks of 32
    for (int64_t d : {int64_t{64}, blocks ? int64_t{96} : int64_t{76}}) {
      const Stored s = store(type, d, holes, rng);
      const KvRows gapped{s.with_holes.data(), type, d, s.holes}, contiguous{s.compact.data(), type, d};
      SCOPED_TRACE(std::string(dtype_name(type)) + " d=" + std::to_string(d) + " holes=" + std::to_string(holes.size()));
      for (int64_t j = 0; j < kEntries; ++j) {
        ASSERT_EQ(std::memcmp(gapped.row(j), contiguous.row(j), static_cast<size_t>(gapped.row_bytes())), 0) << "entry " << j;
      }
      std::vector<float> a(static_cast<size_t>(kEntries * d)), b(a.size());
      gapped.to_f32(0, kEntries, a.data());
      contiguous.to_f32(0, kEntries, b.data());
      EXPECT_TRUE(same_floats(a, b)) << "to_f32";
      KvRowReader reader(gapped);
      EXPECT_EQ(std::memcmp(reader(kEntries - 1), b.data() + (kEntries - 1) * d, static_cast<size_t>(d) * sizeof(float)), 0);

      std::vector<float> tile(kKvTileFloats);
      for (int64_t r : {int64_t{1}, int64_t{4}, kFusedKvRows, kFusedKvRows + 3}) {  // fused and tile paths
        SCOPED_TRACE("rows=" + std::to_string(r));
        std::vector<float> q(static_cast<size_t>(r * d));
        for (float& v : q) v = normal(rng);
        for (auto [c0, width] : {std::pair<int64_t, int64_t>{0, kEntries}, {3, 290}, {200, 57}}) {
          std::vector<float> sa(static_cast<size_t>(r * width)), sb(sa.size());
          kv_key_scores(q.data(), d, r, gapped, c0, width, sa.data(), width, tile.data());
          kv_key_scores(q.data(), d, r, contiguous, c0, width, sb.data(), width, tile.data());
          EXPECT_TRUE(same_floats(sa, sb)) << "key scores from " << c0;
        }
        std::vector<float> p(static_cast<size_t>(r * kEntries));
        for (float& v : p) v = uniform(rng);
        std::vector<float> oa(static_cast<size_t>(r * d)), ob(oa.size());
        kv_weighted_values(p.data(), kEntries, r, gapped, kEntries, oa.data(), d, tile.data());
        kv_weighted_values(p.data(), kEntries, r, contiguous, kEntries, ob.data(), d, tile.data());
        if (type == DType::F32) {
          for (size_t i = 0; i < oa.size(); ++i) ASSERT_NEAR(oa[i], ob[i], 1e-4f * (1.0f + std::abs(ob[i]))) << i;
        } else {
          EXPECT_TRUE(same_floats(oa, ob)) << "weighted values";
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(EveryType, KvRowsHoles,
                         ::testing::Values(DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace deferkv
