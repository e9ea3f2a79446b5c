// Finch's kept sets (docs/methods/finch.md) compared exactly with its rule evaluated in
// double precision on the reference forward: a prompt of context and question given apart
// (question-aware, prefill_prompt), the question's q queries as the window, each query at
// position p weighted by p / q, the mean over the KV head's query heads, no pooling; per
// head the best b - q context entries and the question kept. With its default re-rotation
// the same entries are kept (their values unchanged) at positions 0..b-1.
//
// Mutants applied to the engine, run, seen failing, reverted:
//   the window left at the fallback 32, not the question's length   -> QuestionIsTheWindow
//   no position weighting (finch.cpp's weights left empty)           -> QuestionIsTheWindow
//   the session not told to continue at n (ScoredPress::continue_after_kept
//   without its continue_at)                                          -> RerotatedByDefault
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "engine/session_internals.h"
#include "kv/kv_cache.h"
#include "model/reference_forward.h"
#include "model/test_models.h"
#include "press/kept_set_reference.h"
#include "press/press_test_util.h"

namespace deferkv {
namespace {

using testing::AttentionShape;
using testing::Positions;
using testing::Scores;

// The model and prompt of kept_set_reference_test.cpp, its last 20 tokens the question.
constexpr int64_t kPrompt = 160, kQuestion = 20, kBudget = 72, kLayers = 4;
const AttentionShape kShape = testing::kKeptSetShape;

std::string model_path() { return testing::kept_set_model_path(); }

std::vector<int32_t> distinct_prompt() { return testing::distinct_prompt(kPrompt); }

testing::PressRun run(const std::string& spec) {
  const std::vector<int32_t> prompt = distinct_prompt();
  const std::vector<int32_t> context(prompt.begin(), prompt.end() - kQuestion);
  const std::vector<int32_t> question(prompt.end() - kQuestion, prompt.end());
  return testing::run_press_with_question(model_path(), spec, KvBudget::per_head(kBudget), context, question, false, 1);
}

// Per layer and KV head: the context entries kept, by the rule above.
std::vector<std::vector<Positions>> expected_context() {
  const auto trace = testing::reference_trace(model_path(), distinct_prompt(), testing::KeyVisibility{});
  std::vector<int64_t> queries;
  std::vector<double> weights;
  for (int64_t p = kPrompt - kQuestion; p < kPrompt; ++p) {
    queries.push_back(p);
    weights.push_back(static_cast<double>(p) / kQuestion);
  }
  std::vector<std::vector<Positions>> out(kLayers);
  for (int64_t l = 0; l < kLayers; ++l) {
    for (int64_t g = 0; g < kShape.n_head_kv; ++g) {
      const Scores s = testing::first(testing::group_attention(trace, kShape, l, g, queries, weights, kPrompt),
                                      kPrompt - kQuestion);
      out[l].push_back(testing::best(s, kBudget - kQuestion));
    }
  }
  return out;
}

TEST(KeptSetFinch, QuestionIsTheWindow) {
  const auto r = run("finch:rerotate=false");
  const auto context = expected_context();
  for (int64_t l = 0; l < kLayers; ++l) {
    for (int64_t g = 0; g < kShape.n_head_kv; ++g) {
      const Positions want = testing::united(context[l][g], testing::span(kPrompt - kQuestion, kPrompt + 1));
      EXPECT_EQ(r.positions[l][g], want) << "layer " << l << " KV head " << g;
    }
  }
}

TEST(KeptSetFinch, RerotatedByDefault) {
  const auto plain = run("finch:rerotate=false");
  const auto rerotated = run("finch");
  const KvCache& a = kv_cache_of(*plain.session);
  const KvCache& b = kv_cache_of(*rerotated.session);
  const int64_t d = a.head_dim();
  for (int64_t l = 0; l < kLayers; ++l) {
    for (int64_t g = 0; g < kShape.n_head_kv; ++g) {
      // The prompt's b entries at 0..b-1, the decoded token at b.
      ASSERT_EQ(rerotated.positions[l][g], testing::span(0, kBudget + 1)) << "layer " << l << " KV head " << g;
      // The same entries: their values (never rotated) equal, prompt entry by entry.
      KvRowReader va(a.values(l, g)), vb(b.values(l, g));
      for (int64_t j = 0; j < kBudget; ++j) {
        const float* x = va(j);
        const float* y = vb(j);
        EXPECT_TRUE(std::equal(x, x + d, y)) << "layer " << l << " KV head " << g << " entry " << j;
      }
    }
  }
}

TEST(KeptSetFinch, RefusesWhatReRotationCannotTake) {
  EXPECT_NE(testing::press_error("finch:alloc=adakv").find("same number of entries"), std::string::npos);
  EXPECT_EQ(testing::press_error("finch:alloc=adakv,rerotate=false"), "");
}

}  // namespace
}  // namespace deferkv
