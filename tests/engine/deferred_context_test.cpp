// Deferred compressed contexts (ContextMode::kDeferred, issue 44 item 5): a context
// compressed with deferkv holds the press's candidate pool and its prompt window's share of
// the fused score; each session that starts from it resumes the press, reads its question
// on the pool, and evicts at its own decode step d. The reference is independent of the
// context path: one Session running deferkv question-agnostic on the document then the
// question (prefill_prompt with question_agnostic), whose kept set (every layer's and KV
// head's positions after step d and the answer) and greedy answer each question must equal,
// in memory, after a save and a load, and from four batch-engine sequences at once.
//
// Mutants applied, run, seen failing, reverted (the tests that failed):
//   resume_deferred zeroes the stored window scores (the decode steps' share alone)
//   resume_deferred drops the decode-step observations (the choice frozen at compress time,
//   the window's share alone)
//     -> each: KeptSetAndAnswerAsOneSession, QuestionsChooseTheirOwnKeptSets,
//        SavedAndLoadedAnswersAsOneSession, BatchEngineSequencesEachChooseTheirOwn
//   project_request keeps a deferred context's whole copy reserved after step d
//     -> BatchEngineHoldsThePoolUntilStepD
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <map>
#include <set>

#include <unistd.h>

#include "base/thread_pool.h"
#include "deferkv/batch_engine.h"
#include "deferkv/compressed_context.h"
#include "deferkv/embedding.h"
#include "deferkv/error.h"
#include "deferkv/tokenizer.h"
#include "engine/batch_engine_test_util.h"
#include "engine/story_context.h"
#include "model/test_models.h"

namespace deferkv {
namespace {

constexpr int64_t kBudget = 16;  // entries per KV head: the window of 8 and 8 chosen
constexpr int64_t kAnswerTokens = 8;
// pool=4x is 64 entries of the ~130-token document: the pool cuts, then step d chooses.
const char* const kPresses[] = {"deferkv:window=8,pool=4x", "deferkv:window=8,pool=all", "deferkv:window=8,d=2,pool=4x",
                                "deferkv:window=8,d=2,pool=all"};

using Setup = testing::ContextSetup;

const Setup& stories() {
  static const Setup s = testing::story_context({" What color was the ball?", " Where was the dog?",
                                                  " Who called Lily home?", " The brown dog had a long tail and"});
  return s;
}

SessionOptions options() {
  SessionOptions o;
  o.n_ctx = 256;
  o.n_batch = 16;
  return o;
}

std::unique_ptr<Session> new_session(const std::string& press) {
  auto s = std::make_unique<Session>(stories().model, std::make_shared<ThreadPool>(1), options());
  if (!press.empty()) s->set_press(make_press(press, KvBudget::per_head(kBudget)));
  return s;
}

struct Answer {
  std::vector<int32_t> tokens;
  KeptSet kept;  // the cache after the answer: the kept prompt entries, the question, the answer
};

GenerateOptions greedy_options() {
  GenerateOptions g;
  g.n_predict = kAnswerTokens;
  g.stop_at_end_of_generation = false;
  g.question_agnostic = true;
  return g;
}

Sampler greedy_sampler() {
  SamplerParams p;
  p.temperature = 0;
  return Sampler(p);
}

// The reference: one session with the press, the document then the question read after it
// (question-agnostic), as `deferkv generate --question-agnostic` runs it.
Answer one_session(const std::string& press, int q) {
  auto session = new_session(press);
  Sampler sampler = greedy_sampler();
  Answer a{generate(*session, stories().document, stories().questions[static_cast<size_t>(q)], greedy_options(), sampler)
               .tokens,
           {}};
  a.kept = kept_set(*session);
  return a;
}

Answer from_context(const CompressedContext& context, int q) {
  auto session = new_session("");
  Sampler sampler = greedy_sampler();
  Answer a{generate(*session, context, stories().questions[static_cast<size_t>(q)], greedy_options(), sampler).tokens,
           {}};
  a.kept = kept_set(*session);
  return a;
}

std::shared_ptr<const CompressedContext> compress(const std::string& press) {
  return CompressedContext::compress(*new_session(press), stories().document);
}

void expect_same(const Answer& got, const Answer& expected) {
  EXPECT_EQ(got.tokens, expected.tokens);
  ASSERT_EQ(got.kept.positions.size(), expected.kept.positions.size());
  for (size_t i = 0; i < got.kept.positions.size(); ++i) {
    EXPECT_EQ(got.kept.positions[i], expected.kept.positions[i]) << "layer " << i / got.kept.n_head_kv << " KV head "
                                                                 << i % got.kept.n_head_kv;
  }
}

// Entries per head after step d: the budget, the question and the answer (every token fed).
int64_t entries_after(int q) {
  return kBudget + static_cast<int64_t>(stories().questions[static_cast<size_t>(q)].size()) + kAnswerTokens;
}

TEST(DeferredContext, KeptSetAndAnswerAsOneSession) {
  const int64_t heads = stories().model->config().n_layer * stories().model->config().n_head_kv;
  const auto doc = static_cast<int64_t>(stories().document.size());
  ASSERT_GT(doc, 4 * kBudget) << "pool=4x must cut the document";
  for (const std::string press : kPresses) {
    SCOPED_TRACE(press);
    const auto context = compress(press);
    EXPECT_EQ(context->mode(), ContextMode::kDeferred);
    ASSERT_NE(context->deferred(), nullptr);
    const bool pooled = press.find("pool=4x") != std::string::npos;
    // The pool in every head (or the whole document), and a score for each pool entry.
    EXPECT_EQ(context->kept_entries(), heads * (pooled ? 4 * kBudget : doc));
    for (size_t i = 0; i < context->deferred()->positions.size(); ++i) {
      EXPECT_EQ(context->deferred()->positions[i].size(), static_cast<size_t>(pooled ? 4 * kBudget : doc));
    }
    for (int q = 0; q < 3; ++q) {
      SCOPED_TRACE(q);
      const Answer expected = one_session(press, q);
      ASSERT_EQ(expected.tokens.size(), static_cast<size_t>(kAnswerTokens));
      for (const auto& head : expected.kept.positions) ASSERT_EQ(static_cast<int64_t>(head.size()), entries_after(q));
      expect_same(from_context(*context, q), expected);
    }
  }
}

// A constructed case where the per-question choice shows: the same context, two questions,
// kept sets that differ in some head (and each as its one session's).
TEST(DeferredContext, QuestionsChooseTheirOwnKeptSets) {
  const std::string press = "deferkv:window=8,d=2,pool=4x,eta=0.3";
  const auto context = compress(press);
  const Answer a = from_context(*context, 0), b = from_context(*context, 3);
  expect_same(a, one_session(press, 0));
  expect_same(b, one_session(press, 3));
  const auto doc = static_cast<int32_t>(stories().document.size());
  int differing = 0;
  for (size_t i = 0; i < a.kept.positions.size(); ++i) {
    std::set<int32_t> kept_a, kept_b;  // the document's entries only: the questions differ anyway
    for (int32_t p : a.kept.positions[i]) if (p < doc) kept_a.insert(p);
    for (int32_t p : b.kept.positions[i]) if (p < doc) kept_b.insert(p);
    EXPECT_EQ(kept_a.size(), static_cast<size_t>(kBudget));
    differing += kept_a != kept_b ? 1 : 0;
  }
  EXPECT_GT(differing, 0) << "two questions kept the same document entries in every head";
}

TEST(DeferredContext, SavedAndLoadedAnswersAsOneSession) {
  for (const std::string press : {kPresses[0], kPresses[3]}) {
    SCOPED_TRACE(press);
    const auto context = compress(press);
    const std::string path =
        (std::filesystem::temp_directory_path() / ("deferkv_deferred_" + std::to_string(::getpid()) + ".dkvctx")).string();
    context->save(path);
    const auto loaded = CompressedContext::load(path, *stories().model);
    std::remove(path.c_str());
    EXPECT_EQ(loaded->mode(), ContextMode::kDeferred);
    EXPECT_EQ(loaded->press(), context->press());
    EXPECT_EQ(loaded->bytes(), context->bytes());
    ASSERT_NE(loaded->deferred(), nullptr);
    EXPECT_EQ(loaded->deferred()->scores, context->deferred()->scores);
    EXPECT_EQ(loaded->deferred()->budget.describe(), KvBudget::per_head(kBudget).describe());
    for (int q = 0; q < 2; ++q) expect_same(from_context(*loaded, q), one_session(press, q));
  }
}

// Four sequences from one deferred context, one question each, batched in one engine: each
// gets its alone answer; each holds the pool until its step d, then the budget.
TEST(DeferredContext, BatchEngineSequencesEachChooseTheirOwn) {
  const std::string press = kPresses[2];
  const auto context = compress(press);
  BatchEngine engine(stories().model, std::make_shared<ThreadPool>(2), {4, int64_t{1} << 30, options()});
  std::map<int, SequenceOutcome> outcomes;
  for (int q = 0; q < 4; ++q) {
    SequenceRequest r;
    r.context = context;
    r.prompt = stories().questions[static_cast<size_t>(q)];
    r.max_tokens = kAnswerTokens;
    r.stop_at_end_of_generation = false;
    r.sampling.temperature = 0;
    SequenceCallbacks cb;
    cb.on_finish = [&outcomes, q](const SequenceOutcome& o) { outcomes[q] = o; };
    engine.submit(std::move(r), std::move(cb));
  }
  for (int steps = 0; engine.step(); ++steps) ASSERT_LT(steps, 10000);
  ASSERT_EQ(outcomes.size(), 4u);
  const int64_t heads = stories().model->config().n_layer * stories().model->config().n_head_kv;
  for (int q = 0; q < 4; ++q) {
    SCOPED_TRACE(q);
    EXPECT_TRUE(outcomes[q].error.empty()) << outcomes[q].error;
    EXPECT_EQ(outcomes[q].result.tokens, one_session(press, q).tokens);
    EXPECT_EQ(outcomes[q].kv_entries_kept, heads * entries_after(q));  // evicted to the budget at step d
  }
  const BatchEngineStats s = engine.stats();
  EXPECT_EQ(s.running + s.waiting + s.kv_bytes_used + s.kv_bytes_reserved, 0);
}

// Admission: a sequence from a deferred context reserves its copy of the pool until its
// step d (counted as pooled), then only the budget's share of it.
TEST(DeferredContext, BatchEngineHoldsThePoolUntilStepD) {
  const std::string press = kPresses[2];  // d=2, pool=4x
  const auto context = compress(press);
  BatchEngine engine(stories().model, std::make_shared<ThreadPool>(1), {1, int64_t{1} << 30, options()});
  SequenceRequest r;
  r.context = context;
  r.prompt = stories().questions[0];
  r.max_tokens = kAnswerTokens;
  r.stop_at_end_of_generation = false;
  r.sampling.temperature = 0;
  const std::vector<BatchEngineStats> at_token = testing::stats_at_each_token(engine, std::move(r));
  ASSERT_EQ(at_token.size(), static_cast<size_t>(kAnswerTokens));
  // Token k is sampled after decode step k - 1: steps 0 and 1 hold the pool, step 2 evicted.
  const ModelConfig& c = stories().model->config();
  const int64_t row = c.n_layer * c.n_head_kv * static_cast<int64_t>(sizeof(int16_t)) * 2 * c.head_dim;  // f16 K and V
  for (size_t k = 0; k < 2; ++k) {
    EXPECT_EQ(at_token[k].pooled, 1) << k;
    EXPECT_GE(at_token[k].kv_bytes_reserved, context->bytes()) << k;  // the copy of the pool and scores
  }
  EXPECT_EQ(at_token[2].pooled, 0);
  EXPECT_LT(at_token[2].kv_bytes_reserved, at_token[1].kv_bytes_reserved);
  // After step d: the budget's rows and the question's and answer's, at most.
  const int64_t question = static_cast<int64_t>(stories().questions[0].size());
  EXPECT_LE(at_token[2].kv_bytes_reserved, (kBudget + question + kAnswerTokens) * (row + c.n_layer * c.n_head_kv * 4));
}

TEST(DeferredContext, RefusesWhatItCannotResume) {
  const auto error_of = [](const std::function<void()>& f) -> std::string {
    try {
      f();
    } catch (const Error& e) {
      return e.what();
    }
    return "(no error)";
  };
  // A composition, or another scorer deferred to step d, keeps the existing refusal.
  for (const std::string press : {"deferkv:window=8+moment_kv", "snapkv:d=2,window=8", "tova"}) {
    const std::string e = error_of([&] { compress(press); });
    EXPECT_NE(e.find("evicts after the prefill"), std::string::npos) << press << ": " << e;
  }
  // A deferred context holds the press: a session with one of its own is refused.
  const auto context = compress(kPresses[0]);
  const std::string e = error_of([&] { start_session(*new_session("snapkv:window=8"), *context); });
  EXPECT_NE(e.find("without a press"), std::string::npos) << e;
}

}  // namespace
}  // namespace deferkv
