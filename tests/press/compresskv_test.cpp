// CompressKV: error-aware layer budgets by hand, the profile file's checks, and the
// shared per-layer selection on a model.
#include <gtest/gtest.h>

#include <fstream>

#include "deferkv/error.h"
#include "kv/kv_cache.h"
#include "press/core/allocation.h"
#include "press/press_test_util.h"
#include "support/scratch_dir.h"

namespace deferkv {
namespace {

TEST(ErrorAwareLayerBudgets, FollowTheScoresAndKeepTheTotal) {
  // b = 100, 3 layers: 300 to share, 204 beyond the floors of 32:
  // 32 + round(0.5 * 204) = 134, 32 + round(61.2) = 93, 32 + round(40.8) = 73.
  EXPECT_EQ(error_aware_layer_budgets({0.5, 0.3, 0.2}, 100, 32, 300), (std::vector<int64_t>{134, 93, 73}));
  // One layer takes everything but is capped at 30: the 25 left go one by one to the
  // others in descending score (ties in layer order), cycling.
  const std::vector<double> u = {1, 0, 0, 0, 0, 0, 0, 0, 0, 0};
  EXPECT_EQ(error_aware_layer_budgets(u, 10, 5, 30), (std::vector<int64_t>{30, 8, 8, 8, 8, 8, 8, 8, 7, 7}));
}

std::string write_profile(const std::string& name, const std::string& body) {
  const std::string path = testing::scratch_file(name);
  std::ofstream(path) << body;
  return path;
}

// The press-test model: 3 layers, 4 query heads.
std::string profile_for_test_model(const std::string& name, const std::string& heads) {
  return write_profile(name, R"({"format": "deferkv-compresskv-profile/1",
    "model": {"name": "press-test", "n_layer": 3, "n_head": 4},
    "retrieval_heads": [)" + heads + R"(],
    "layer_scores": [0.6, 0.3, 0.1]})");
}

std::string error_of(const std::string& spec) {
  try {
    testing::run_press(spec, KvBudget::per_head(40), testing::random_prompt(100), 1);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(CompressKvProfile, ProblemsAreClearErrors) {
  EXPECT_NE(error_of("compresskv").find("needs profile=PATH"), std::string::npos);
  EXPECT_NE(error_of("compresskv:profile=/nonexistent.json").find("cannot read the CompressKV profile"),
            std::string::npos);
  // A folder (found by fuzz/fuzz_press_spec.cpp: its first read threw std::ios_base::failure).
  EXPECT_NE(error_of("compresskv:profile=" + ::testing::TempDir()).find("cannot read the CompressKV profile"),
            std::string::npos);
  // A name too long for the system (found by the same target once the folder was refused:
  // std::filesystem::is_regular_file threw filesystem_error).
  EXPECT_NE(error_of("compresskv:profile=/" + std::string(5000, 'x')).find("cannot read the CompressKV profile"),
            std::string::npos);
  const auto wrong_format = write_profile("ckv-format.json", R"({"format": "x"})");
  EXPECT_NE(error_of("compresskv:profile=" + wrong_format).find("is not a CompressKV profile"), std::string::npos);
  const auto bad_head = profile_for_test_model("ckv-head.json", "[0], [9], [1]");
  EXPECT_NE(error_of("compresskv:profile=" + bad_head).find("layer 1 names head 9 of 4"), std::string::npos);
  const auto short_lists = write_profile("ckv-lists.json", R"({"format": "deferkv-compresskv-profile/1",
    "model": {"name": "x", "n_layer": 3, "n_head": 4}, "retrieval_heads": [[0]], "layer_scores": [1]})");
  EXPECT_NE(error_of("compresskv:profile=" + short_lists).find("one entry per layer (3)"), std::string::npos);
  const auto mismatch = write_profile("ckv-mismatch.json", R"({"format": "deferkv-compresskv-profile/1",
    "model": {"name": "other", "n_layer": 2, "n_head": 4},
    "retrieval_heads": [[0], [1]], "layer_scores": [0.5, 0.5]})");
  EXPECT_NE(error_of("compresskv:profile=" + mismatch).find("profile is for a model with 2 layers"), std::string::npos);
}

TEST(CompressKv, OneSelectionPerLayerWithErrorAwareBudgets) {
  const auto prompt = testing::random_prompt(150, 41);
  const auto profile = profile_for_test_model("ckv-good.json", "[0, 1], [2, 3], [3, 0]");
  const auto run = testing::run_press("compresskv:profile=" + profile, KvBudget::per_head(40), prompt, 2);
  // b = 40, floor 32: 120 to share, 24 beyond the floors: 32 + 14.4 -> 46, 32 + 7.2 -> 39, 32 + 2.4 -> 34
  // (119), repaired by one on the top layer: 47, 39, 34.
  const int64_t budgets[] = {47, 39, 34};
  for (size_t l = 0; l < run.positions.size(); ++l) {
    for (const auto& head : run.positions[l]) {
      EXPECT_EQ(head, run.positions[l][0]);  // shared by the KV heads
      const auto prompt_entries = std::count_if(head.begin(), head.end(), [](int32_t p) { return p < 150; });
      EXPECT_EQ(prompt_entries, budgets[l]) << "layer " << l;
      for (int32_t p = 142; p < 150; ++p) EXPECT_TRUE(std::binary_search(head.begin(), head.end(), p));
    }
  }
  // Other retrieval heads observe differently.
  const auto other = profile_for_test_model("ckv-other.json", "[3], [0], [1]");
  const auto rerun = testing::run_press("compresskv:profile=" + other, KvBudget::per_head(40), prompt, 2);
  EXPECT_NE(rerun.positions, run.positions);
}

TEST(CalibratedAllocation, AnyScorerTakesTheProfilesLayerBudgets) {
  // alloc=calibrated on SnapKV's and KNorm's scores: the layer budgets of the test above
  // (47, 39, 34 entries per head, window included), each head choosing its own.
  const auto prompt = testing::random_prompt(150, 41);
  const auto profile = profile_for_test_model("ckv-calibrated.json", "[0], [1], [2]");
  const int64_t budgets[] = {47, 39, 34};
  for (const std::string spec : {"snapkv:window=8,alloc=calibrated,profile=", "knorm:alloc=calibrated,profile="}) {
    const auto run = testing::run_press(spec + profile, KvBudget::per_head(40), prompt, 2);
    for (size_t l = 0; l < run.positions.size(); ++l) {
      for (const auto& head : run.positions[l]) {
        const auto prompt_entries = std::count_if(head.begin(), head.end(), [](int32_t p) { return p < 150; });
        EXPECT_EQ(prompt_entries, budgets[l]) << spec << " layer " << l;
      }
    }
  }
  EXPECT_NE(error_of("knorm:alloc=calibrated").find("needs profile=PATH"), std::string::npos);
  EXPECT_NE(error_of("knorm:profile=" + profile).find("read by alloc=calibrated only"), std::string::npos);
  const auto other_depth = write_profile("ckv-depth.json", R"({"format": "deferkv-compresskv-profile/1",
    "model": {"name": "other", "n_layer": 2, "n_head": 4},
    "retrieval_heads": [[0], [1]], "layer_scores": [0.5, 0.5]})");
  EXPECT_NE(error_of("knorm:alloc=calibrated,profile=" + other_depth).find("has 2 layer scores; this model has 3"),
            std::string::npos);
}

}  // namespace
}  // namespace deferkv
