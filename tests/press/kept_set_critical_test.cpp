// CriticalKV's kept sets (and CriticalAdaKV's, criticalkv:alloc=adakv) compared exactly with
// its rule evaluated in double precision from the reference forward's attention and values
// and the model's W_O read independently (docs/methods/criticalkv.md): SnapKV's pooled
// window score s_j; per KV head keeping k candidates, the best floor(0.5 k) by s (stage 1),
// then the best of (s_j + 1e-4) * mean_h ||W_O,h v_j||_1 (stage 2); the window kept.
//
// Mutants applied to the engine, run, seen failing, reverted:
//   stage 2 without the value norm (two_stage.cpp scores s + epsilon)   -> CriticalKV,
//                                                                           CriticalAdaKV
//   the norm of the group's first query head only, not the group's mean   -> CriticalKV,
//                                                                           CriticalAdaKV
//   AdaKV's budgets taken from the rescored scores (the allocation run
//   again after the two stages, scored_press.cpp's choose)               -> CriticalAdaKV
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "model/reference_forward.h"
#include "model/test_models.h"
#include "press/kept_set_reference.h"
#include "press/press_test_util.h"

namespace deferkv {
namespace {

using testing::AttentionShape;
using testing::best;
using testing::Positions;
using testing::Scores;

// The model and prompt of kept_set_reference_test.cpp: 4 layers, 4 query heads over 2 KV
// heads, 160 distinct tokens, 72 entries kept per head.
constexpr int64_t kPrompt = 160, kBudget = 72, kLayers = 4, kEmbd = 64;
constexpr int64_t kWindow = 32, kKernel = 7;
const AttentionShape kShape = testing::kKeptSetShape;

std::string model_path() { return testing::kept_set_model_path(); }

std::vector<int32_t> distinct_prompt() { return testing::distinct_prompt(kPrompt); }

const testing::ReferenceTrace& trace() {
  static const testing::ReferenceTrace t = testing::reference_trace(model_path(), distinct_prompt(), testing::KeyVisibility{});
  return t;
}

Scores window_scores(int64_t l, int64_t g) {
  std::vector<int64_t> queries;
  for (int64_t t = kPrompt - kWindow; t < kPrompt; ++t) queries.push_back(t);
  const Scores a = testing::group_attention(trace(), kShape, l, g, queries,
                                            std::vector<double>(queries.size(), 1.0 / kWindow), kPrompt);
  return testing::max_pool(testing::first(a, kPrompt - kWindow), kKernel);
}

// mean over KV head g's query heads h of sum_e |sum_i W_O[e][h d + i] v_j[i]|.
Scores projected_norms(int64_t l, int64_t g) {
  const auto w_o = testing::reference_tensor(model_path(), "blk." + std::to_string(l) + ".attn_output.weight");
  const int64_t d = kShape.head_dim;
  Scores out;
  for (int64_t j = 0; j < kPrompt - kWindow; ++j) {
    const std::vector<double>& v = trace().values[l][j];
    double sum = 0;
    for (int64_t h = g * kShape.group(); h < (g + 1) * kShape.group(); ++h) {
      for (int64_t e = 0; e < kEmbd; ++e) {
        double dot = 0;
        for (int64_t i = 0; i < d; ++i) dot += w_o[e][h * d + i] * v[g * d + i];
        sum += std::abs(dot);
      }
    }
    out.push_back(sum / static_cast<double>(kShape.group()));
  }
  return out;
}

// The two stages for a head keeping k candidates.
Positions two_stage(const Scores& s, const Scores& norms, int64_t k) {
  Scores rescored(s.size());
  for (size_t j = 0; j < s.size(); ++j) rescored[j] = (s[j] + 1e-4) * norms[j];
  for (int32_t j : best(s, k / 2)) rescored[j] = std::numeric_limits<double>::infinity();
  return best(rescored, k);
}

void expect_kept(const std::string& spec, const std::function<std::vector<int64_t>(const std::vector<Scores>&)>& counts) {
  SCOPED_TRACE(spec);
  const auto run = testing::run_press_on_model(model_path(), spec, KvBudget::per_head(kBudget), distinct_prompt(), 1);
  int64_t changed = 0;  // heads where stage 2 keeps other entries than the base score would
  for (int64_t l = 0; l < kLayers; ++l) {
    std::vector<Scores> base;
    for (int64_t g = 0; g < kShape.n_head_kv; ++g) base.push_back(window_scores(l, g));
    const std::vector<int64_t> k = counts(base);
    for (int64_t g = 0; g < kShape.n_head_kv; ++g) {
      const Positions chosen = two_stage(base[g], projected_norms(l, g), k[g]);
      changed += chosen != best(base[g], k[g]);
      const Positions want = testing::united(testing::united(chosen, testing::span(kPrompt - kWindow, kPrompt)),
                                             testing::span(kPrompt, kPrompt + 1));
      EXPECT_EQ(run.positions[l][g], want) << "layer " << l << " KV head " << g;
    }
  }
  // The second stage matters on this model: the test would see a scorer without it.
  EXPECT_GT(changed, 0);
}

TEST(KeptSetCritical, CriticalKV) {
  expect_kept("criticalkv", [](const std::vector<Scores>& heads) {
    return std::vector<int64_t>(heads.size(), kBudget - kWindow);
  });
}

TEST(KeptSetCritical, CriticalAdaKV) {
  // AdaKV's head budgets from the window scores, then each head's two stages.
  bool uneven = false;
  expect_kept("criticalkv:alloc=adakv", [&](const std::vector<Scores>& heads) {
    const auto k = testing::adakv_budgets(heads, kBudget - kWindow, 0.2);
    uneven |= k[0] != k[1];
    return k;
  });
  EXPECT_TRUE(uneven);
}

TEST(KeptSetCritical, RefusesChunksAndBadRatios) {
  EXPECT_NE(testing::press_error("criticalkv:chunk=10").find("two stages"), std::string::npos);
  EXPECT_NE(testing::press_error("criticalkv:first_stage_ratio=1.5").find("first_stage_ratio"), std::string::npos);
}

}  // namespace
}  // namespace deferkv
