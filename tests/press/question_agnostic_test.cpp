// Question-agnostic compression (deferkv::prefill_prompt, Session::prefill_question): the
// press compresses the context alone, then the question is read on the compressed cache.
// The kept sets are compared exactly with the methods' rules evaluated in double precision
// on the reference forward (press/kept_set_reference.h), applied to the context alone: the
// window is the context's last w tokens, the question's positions are never candidates and
// all of them are kept, and DeferKV's decode observers are the tokens generated after the
// question.
//
// Mutants applied to the engine, run, seen failing, reverted (the tests that failed):
//   prefill_prompt's agnostic branch prefills context and question in one call, so the
//   press's prefill end comes after the question                   -> SnapKvKeepsWhatTheContextAloneDecides,
//                                                                     DeferKvObservesTheAnswerAfterTheQuestion
//   OneShotPress::on_question (now PromptPress's kQuestion) does nothing (the question's first row
//   is taken for decode step 1, the answer's steps are past d)      -> DeferKvObservesTheAnswerAfterTheQuestion
//                                                                     (a crash: step 2 has no observation)
//   MomentKvPress::on_question (now PromptPress's kQuestion) does nothing (the question's entries
//   are ranked as generated ones)                                   -> MomentKvKeepsTheQuestionAsPrompt
//   Session::prefill_question calls the prompt's begin and end
//   as prefill does                                                 -> SnapKvKeepsWhatTheContextAloneDecides,
//                                                                     DeferKvObservesTheAnswerAfterTheQuestion
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
#include <random>

#include "base/thread_pool.h"
#include "deferkv/error.h"
#include "deferkv/generate.h"
#include "model/reference_forward.h"
#include "press/kept_set_reference.h"
#include "press/press_test_util.h"

namespace deferkv {
namespace {

using testing::best;
using testing::first;
using testing::group_attention;
using testing::max_pool;
using testing::Positions;
using testing::Scores;
using testing::span;
using testing::united;

constexpr int64_t kContext = 150, kQuestion = 14, kBudget = 64;
constexpr int64_t kWindow = 32, kKernel = 7;  // the window-scored methods' defaults
constexpr double kEta = 0.7;
const testing::AttentionShape kShape{4, 2, 32};  // press_test_model_path()'s
constexpr int64_t kLayers = 3;

// Distinct token ids (no two keys of layer 0 alike): the context, then the question.
std::vector<int32_t> distinct_tokens(int64_t offset, int64_t n) {
  std::vector<int32_t> tokens(400);
  std::iota(tokens.begin(), tokens.end(), 3);
  std::shuffle(tokens.begin(), tokens.end(), std::mt19937(5));
  return {tokens.begin() + offset, tokens.begin() + offset + n};
}
const std::vector<int32_t>& context() {
  static const auto c = distinct_tokens(0, kContext);
  return c;
}
const std::vector<int32_t>& question() {
  static const auto q = distinct_tokens(kContext, kQuestion);
  return q;
}

testing::PressRun run(const std::string& spec, bool agnostic, int64_t n_decode) {
  return testing::run_press_with_question(testing::press_test_model_path(), spec, KvBudget::per_head(kBudget), context(),
                                          question(), agnostic, n_decode);
}

testing::ReferenceTrace trace_of(const std::vector<int32_t>& generated) {
  std::vector<int32_t> tokens = context();
  tokens.insert(tokens.end(), question().begin(), question().end());
  tokens.insert(tokens.end(), generated.begin(), generated.end());
  return testing::reference_trace(testing::press_test_model_path(), tokens, testing::KeyVisibility{});
}

// The mean over KV head g's query heads of the attention of queries [from, to), each
// weighted by `weight`, on the context's keys (each query's softmax over all it sees).
Scores observed(const testing::ReferenceTrace& trace, int64_t l, int64_t g, int64_t from, int64_t to, double weight) {
  std::vector<int64_t> queries;
  for (int64_t t = from; t < to; ++t) queries.push_back(t);
  return group_attention(trace, kShape, l, g, queries, std::vector<double>(queries.size(), weight), kContext);
}

// What a head keeps of the context: the best candidates by `score`, then the context's
// window; and everything after the context.
void expect_kept(const testing::PressRun& engine, const std::function<Scores(int64_t, int64_t)>& score) {
  const int64_t end = kContext + kQuestion + static_cast<int64_t>(engine.generated.size()) - 1;
  for (int64_t l = 0; l < kLayers; ++l) {
    for (int64_t g = 0; g < kShape.n_head_kv; ++g) {
      const Positions chosen = best(max_pool(first(score(l, g), kContext - kWindow), kKernel), kBudget - kWindow);
      EXPECT_EQ(engine.positions[l][g], united(chosen, span(kContext - kWindow, end))) << "layer " << l << " head " << g;
    }
  }
}

TEST(QuestionAgnostic, SnapKvKeepsWhatTheContextAloneDecides) {
  const auto agnostic = run("snapkv", true, 2);
  const testing::ReferenceTrace trace = trace_of({});
  expect_kept(agnostic, [&](int64_t l, int64_t g) {
    return observed(trace, l, g, kContext - kWindow, kContext, 1.0 / kWindow);
  });
  // The same kept set as compressing the context with nothing after it.
  const auto alone = testing::run_press("snapkv", KvBudget::per_head(kBudget), context(), 0);
  for (int64_t l = 0; l < kLayers; ++l) {
    for (int64_t g = 0; g < kShape.n_head_kv; ++g) {
      const Positions& kept = agnostic.positions[l][g];
      EXPECT_EQ(Positions(kept.begin(), kept.begin() + kBudget), alone.positions[l][g]);
    }
  }
  // Question-aware, the window is the question's end: another choice of the context's entries.
  EXPECT_GT(testing::differing_heads(agnostic, run("snapkv", false, 2)), 0);
}

TEST(QuestionAgnostic, QuestionAwareIsOnePrefillOfContextAndQuestion) {
  std::vector<int32_t> prompt = context();
  prompt.insert(prompt.end(), question().begin(), question().end());
  const auto aware = run("snapkv", false, 2);
  const auto one_prompt = testing::run_press("snapkv", KvBudget::per_head(kBudget), prompt, 2);
  EXPECT_EQ(aware.positions, one_prompt.positions);
  EXPECT_EQ(aware.generated, one_prompt.generated);
}

// DeferKV d=2 (block fusion, base snapkv, pool=all): the window of the context's last 32
// queries is one observation one step older than decode step 1; steps 1 and 2 are the
// answer's first two tokens, fed after the question on the full cache, their softmax over
// every entry (question included), scored on the context's candidates.
TEST(QuestionAgnostic, DeferKvObservesTheAnswerAfterTheQuestion) {
  constexpr int64_t d = 2;
  const auto agnostic = run("deferkv:d=2,pool=all", true, d);
  const testing::ReferenceTrace trace = trace_of({agnostic.generated[0], agnostic.generated[1]});
  expect_kept(agnostic, [&](int64_t l, int64_t g) {
    Scores fused(kContext, 0.0);
    double z = 0;
    const auto add = [&](const Scores& s, double weight) {
      for (int64_t j = 0; j < kContext; ++j) fused[j] += weight * s[j];
      z += weight;
    };
    add(observed(trace, l, g, kContext - kWindow, kContext, 1.0 / kWindow), std::pow(kEta, d));
    for (int64_t s = 1; s <= d; ++s) {
      const int64_t position = kContext + kQuestion + s - 1;
      add(observed(trace, l, g, position, position + 1, 1.0), std::pow(kEta, d - s));
    }
    for (double& f : fused) f /= z;
    return fused;
  });
  // Until step d it decodes on the full cache: the answer is the full cache's.
  EXPECT_EQ(agnostic.generated, run("full", true, d).generated);
}

// Per-step presses hold the question's entries as generated ones: the first cut after it
// brings every head, question included, back to the budget.
TEST(QuestionAgnostic, PerStepPressesCutTheQuestionLikeGeneratedTokens) {
  for (const std::string spec : {"h2o:per_step=true", "tova", "streaming_llm:per_step=true"}) {
    const auto agnostic = run(spec, true, 1);
    for (const auto& layer : agnostic.positions) {
      for (const auto& head : layer) EXPECT_EQ(static_cast<int64_t>(head.size()), kBudget) << spec;
    }
  }
}

// Moment-KV ranks generated tokens only: the question is kept whole, as the prompt is.
TEST(QuestionAgnostic, MomentKvKeepsTheQuestionAsPrompt) {
  const auto agnostic = run("moment_kv:decode_budget=2", true, 4);
  for (const auto& layer : agnostic.positions) {
    for (const auto& head : layer) {
      ASSERT_EQ(static_cast<int64_t>(head.size()), kContext + kQuestion + 2);
      EXPECT_EQ(Positions(head.begin(), head.begin() + kContext + kQuestion), span(0, kContext + kQuestion));
    }
  }
}

TEST(QuestionAgnostic, RefusesAMissingQuestionOrContext) {
  const auto model = Model::load(testing::press_test_model_path());
  Session session(model, std::make_shared<ThreadPool>(1));
  try {
    prefill_prompt(session, context(), {}, true);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("needs a question"), std::string::npos) << e.what();
  }
  EXPECT_EQ(session.n_past(), 0);
  try {
    session.prefill_question(question());
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("prefill the context first"), std::string::npos) << e.what();
  }
  session.prefill(context());
  try {
    session.prefill_question(std::vector<int32_t>(static_cast<size_t>(session.n_ctx()), 5));
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("the question has"), std::string::npos) << e.what();
  }
  EXPECT_EQ(session.n_past(), kContext);
}

}  // namespace
}  // namespace deferkv
