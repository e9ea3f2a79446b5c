// The batch engine against generate() run one sequence at a time: the same tokens per
// sequence, whatever else shares its forward passes; admission under a KV cap; cancellation.
#include "deferkv/batch_engine.h"

#include <gtest/gtest.h>

#include <map>
#include <optional>

#include "base/thread_pool.h"
#include "deferkv/embedding.h"
#include "deferkv/error.h"
#include "deferkv/tokenizer.h"
#include "engine/batch_engine_test_util.h"
#include "engine/kv_admission.h"
#include "engine/session_internals.h"
#include "kv/kv_cache.h"
#include "model/test_models.h"

namespace deferkv {
namespace {

// Eight presses, one a sequence: the full cache, prefill-time and decode-time eviction,
// DeferKV's step-d trigger, and LAQ, whose lookahead runs in its own session's pass.
const char* const kPresses[] = {"",          "snapkv:window=4", "adakv:window=4", "deferkv:d=2,window=4",
                                "h2o:window=4", "tova", "laq:window=4",   "knorm"};
constexpr int64_t kBudget = 12;
constexpr int64_t kNewTokens = 24;
constexpr int64_t kPromptTokens = 40;

const char* const kPrompts[] = {
    "Once upon a time, there was a little girl named Lily. She loved to play in the park with her dog.",
    "The sun was shining and the birds were singing. Tom went outside to",
    "One day, a big bear came to the forest. The bear was very hungry and wanted to find some honey in the",
    "Sara had a red ball. She liked to throw it high in the sky and catch it with both hands, every day after",
    "There was a boy who liked to draw. He drew a cat, a dog and a",
    "Mom said it was time for bed, but Ben wanted to read one more story about the dragon who",
    "In a small town there lived an old man with a long white beard. Every morning he walked to the",
    "The little fish swam in the blue sea. It was looking for its friend, the crab, who lived under a"};

SessionOptions session_options() {
  SessionOptions o;
  o.n_ctx = 256;
  o.n_batch = 8;  // prompts take several prefill batches, interleaved with the others' decode steps
  return o;
}

// Prompt i: the stories from the i-th on, twice round, as n tokens.
std::vector<int32_t> prompt_for(const Model& model, int i, int64_t n) {
  std::string text;
  for (int k = 0; k < 16; ++k) text += std::string(kPrompts[(i + k) % 8]) + " ";
  std::vector<int32_t> tokens = model.tokenizer().encode(text, true, false);
  if (static_cast<int64_t>(tokens.size()) < n) fail("the test's stories give {} tokens, fewer than {}", tokens.size(), n);
  tokens.resize(static_cast<size_t>(n));
  return tokens;
}

SequenceRequest request_for(const Model& model, int i, int64_t new_tokens = kNewTokens,
                            int64_t prompt_tokens = kPromptTokens) {
  SequenceRequest r;
  r.prompt = prompt_for(model, i, prompt_tokens);
  r.max_tokens = new_tokens;
  r.stop_at_end_of_generation = false;
  r.sampling.temperature = 0;
  const std::string spec = kPresses[i];
  if (!spec.empty()) {
    r.budget = KvBudget::per_head(kBudget);
    r.press = make_press(spec, r.budget);
  }
  return r;
}

// generate() on a session of its own.
std::vector<int32_t> generated_alone(const std::shared_ptr<const Model>& model, const std::shared_ptr<ThreadPool>& pool,
                                     int i, int64_t new_tokens = kNewTokens) {
  Session session(model, pool, session_options());
  SequenceRequest r = request_for(*model, i, new_tokens);
  session.set_press(std::move(r.press));
  Sampler sampler(r.sampling);
  GenerateOptions o;
  o.n_predict = r.max_tokens;
  o.stop_at_end_of_generation = false;
  return generate(session, r.prompt, o, sampler).tokens;
}

using testing::stats_at_each_token;
using testing::step_until_idle;

class BatchEngineTest : public ::testing::TestWithParam<std::string> {
 protected:
  std::shared_ptr<const Model> model = Model::load(GetParam());
  std::shared_ptr<ThreadPool> pool = std::make_shared<ThreadPool>(2);

  BatchEngineOptions options(int64_t max_sequences, int64_t kv_capacity_bytes) const {
    return {max_sequences, kv_capacity_bytes, session_options()};
  }
};

// Eight sequences with eight presses in one engine: each gets generate()'s tokens.
TEST_P(BatchEngineTest, EightPressesAtOnceGiveEachSequenceItsGenerateTokens) {
  BatchEngine engine(model, pool, options(8, int64_t{1} << 30));
  std::map<SequenceId, int> index;
  std::map<int, SequenceOutcome> outcomes;
  for (int i = 0; i < 8; ++i) {
    SequenceCallbacks cb;
    cb.on_finish = [&outcomes, i](const SequenceOutcome& o) { outcomes[i] = o; };
    index[engine.submit(request_for(*model, i), std::move(cb))] = i;
  }
  step_until_idle(engine);
  ASSERT_EQ(outcomes.size(), 8u);
  for (int i = 0; i < 8; ++i) {
    const SequenceOutcome& o = outcomes[i];
    EXPECT_TRUE(o.error.empty()) << kPresses[i] << ": " << o.error;
    EXPECT_EQ(o.result.tokens, generated_alone(model, pool, i)) << "press '" << kPresses[i] << "'";
    const int64_t full = (kPromptTokens + kNewTokens) * model->config().n_layer * model->config().n_head_kv;
    if (std::string(kPresses[i]).empty()) {
      EXPECT_EQ(o.kv_entries_kept, full);
    } else {
      EXPECT_LT(o.kv_entries_kept, full) << kPresses[i] << " evicted nothing";
    }
  }
  const BatchEngineStats s = engine.stats();
  EXPECT_GT(s.decoded_rows, 2 * s.decode_steps) << "decode steps were not batched";
  EXPECT_EQ(s.running + s.waiting + s.kv_bytes_used + s.kv_bytes_reserved, 0);
}

// A cap that holds two full prompts: the eight compressed sequences (the prompt until their
// prefill evicts, then their budget) run at once, the eight full-cache ones wait their turn,
// and all sixteen complete. 200-token prompts prefilled in one batch, 24 new tokens, snapkv
// keeping 8 per head: 7 x (8 + 24) kept entries and one more prompt at its peak fit in
// 2 x (200 + 24).
TEST_P(BatchEngineTest, UnderACapCompressedSequencesRunTogetherWhileFullOnesQueue) {
  constexpr int64_t kLong = 200;
  constexpr int64_t kFew = 24;
  const int64_t per_token = BatchEngine(model, pool, options(1, 1)).kv_bytes_per_token();
  const int64_t cap = 2 * (kLong + kFew) * per_token;
  BatchEngineOptions o = options(16, cap);
  o.session.n_batch = kLong;
  BatchEngine engine(model, pool, o);
  int64_t most_running = 0;
  int64_t most_waiting = 0;
  std::map<int, SequenceOutcome> outcomes;
  auto submit = [&](int key, SequenceRequest r) {
    SequenceCallbacks cb;
    cb.on_token = [&](int32_t) {
      const BatchEngineStats s = engine.stats();
      EXPECT_LE(s.kv_bytes_used, cap);
      most_running = std::max(most_running, s.running);
      most_waiting = std::max(most_waiting, s.waiting);
      return true;
    };
    cb.on_finish = [&outcomes, key](const SequenceOutcome& o) { outcomes[key] = o; };
    engine.submit(std::move(r), std::move(cb));
  };
  // snapkv on every prompt: it evicts at the end of its prefill.
  for (int i = 0; i < 8; ++i) {
    SequenceRequest r = request_for(*model, i, kFew, kLong);
    r.budget = KvBudget::per_head(8);
    r.press = make_press("snapkv:window=4", r.budget);
    submit(i, std::move(r));
  }
  for (int i = 0; i < 8; ++i) {
    SequenceRequest r = request_for(*model, i, kFew, kLong);
    r.press.reset();
    submit(100 + i, std::move(r));
  }
  step_until_idle(engine);
  ASSERT_EQ(outcomes.size(), 16u);
  for (const auto& [key, o] : outcomes) EXPECT_TRUE(o.error.empty()) << key << ": " << o.error;
  EXPECT_GE(most_running, 8);
  EXPECT_GT(most_waiting, 0);
  for (const auto& [key, o] : outcomes) EXPECT_EQ(o.result.tokens.size(), static_cast<size_t>(kFew)) << key;
}

// DeferKV with a candidate pool (d = 3, pool 16, budget 8): admission reserves one layer's
// prompt beside every layer's pool, then, once the prefill has cut the layers to the pool,
// the pool until step 3 evicts, then the budget (kv_admission.h's stages, hand-checked there).
TEST_P(BatchEngineTest, APooledPressHoldsItsPoolUntilStepDThenItsBudget) {
  constexpr int64_t kLong = 200, kNew = 6;
  BatchEngine engine(model, pool, options(1, int64_t{1} << 30));
  const int64_t per_token = engine.kv_bytes_per_token();
  SequenceRequest r = request_for(*model, 0, kNew, kLong);
  r.budget = KvBudget::per_head(8);
  r.press = make_press("deferkv:d=3,window=4,pool=16", r.budget);
  const KvProjection p = project_kv(per_token, model->config().n_layer, kLong, kNew, 8, true, 16);
  ASSERT_LT(p.after_eviction, p.after_pool);
  const std::vector<BatchEngineStats> at_token = stats_at_each_token(engine, std::move(r));
  ASSERT_EQ(at_token.size(), static_cast<size_t>(kNew));
  for (size_t k = 0; k < at_token.size(); ++k) {
    // y_1 .. y_3 come from the prefill and steps 1, 2 (the pool); y_4 after step 3's eviction.
    const bool in_pool = k < 3;
    EXPECT_EQ(at_token[k].kv_bytes_reserved, in_pool ? p.after_pool : p.after_eviction) << "token " << k + 1;
    EXPECT_EQ(at_token[k].pooled, in_pool ? 1 : 0) << "token " << k + 1;
    EXPECT_EQ(at_token[k].kv_bytes_pooled, in_pool ? at_token[k].kv_bytes_used : 0) << "token " << k + 1;
  }
}

// Presses that keep more than their budget (SimLayerKV's busy layers, DuoAttention's
// retrieval heads, per-layer ratios) declare it (Press::holding), and the engine reserves
// that after eviction, not the budget: what the sequence holds never exceeds it.
TEST_P(BatchEngineTest, PressesThatKeepMoreThanTheirBudgetReserveWhatTheyKeep) {
  constexpr int64_t kLong = 200, kNew = 4, kKept = 8;
  const ModelConfig& c = model->config();
  const std::string ratios = [&] {
    std::string out;
    for (int64_t l = 0; l < c.n_layer; ++l) out += (l > 0 ? "/" : "") + std::string(l % 2 == 0 ? "0.5" : "0.75");
    return out;
  }();
  // Hand-computed means per KV head: per_layer keeps 100 of 200 in the even layers, 50 in the odd;
  // duo_attention streams round(H / 2) of the H = n_layer x n_head_kv heads, which keep 4 + 8.
  const int64_t heads = c.n_layer * c.n_head_kv, streaming = (heads + 1) / 2;
  const int64_t per_layer_kept = ((c.n_layer + 1) / 2 * 100 + c.n_layer / 2 * 50 + c.n_layer - 1) / c.n_layer;
  const int64_t duo_kept = ((heads - streaming) * kLong + streaming * 12 + heads - 1) / heads;
  for (const auto& [spec, kept] : std::vector<std::pair<std::string, int64_t>>{
           {"simlayerkv", kLong},
           {"duo_attention:head_compression_ratio=0.5,sink_size=4,recent_size=8", duo_kept},
           {"snapkv:window=4,alloc=per_layer,ratios=" + ratios, per_layer_kept}}) {
    SCOPED_TRACE(spec);
    BatchEngine engine(model, pool, options(1, int64_t{1} << 30));
    SequenceRequest r = request_for(*model, 0, kNew, kLong);
    r.budget = KvBudget::per_head(kKept);
    r.press = make_press(spec, r.budget);
    EXPECT_EQ(r.press->holding(press_shape(c), kLong).kept, kept);
    const KvProjection p = project_kv(engine.kv_bytes_per_token(), c.n_layer, kLong, kNew, kept,
                                      r.press->points().evicts_each_prompt_layer());
    const std::vector<BatchEngineStats> at_token = stats_at_each_token(engine, std::move(r));
    ASSERT_EQ(at_token.size(), static_cast<size_t>(kNew));
    for (const BatchEngineStats& st : at_token) {
      EXPECT_EQ(st.kv_bytes_reserved, p.after_eviction);
      EXPECT_LE(st.kv_bytes_used, st.kv_bytes_reserved);
    }
  }
}

// A long prompt is prefilled one n_batch a step: the sequence already decoding gets a token
// at every one of those steps instead of waiting for the whole prompt.
TEST_P(BatchEngineTest, ALongPromptDoesNotStallTheSequencesDecoding) {
  BatchEngine engine(model, pool, options(4, int64_t{1} << 30));
  int decoding_tokens = 0;
  bool long_started = false;
  int tokens_during_long_prefill = 0;
  SequenceCallbacks decoding;
  decoding.on_token = [&](int32_t) {
    ++decoding_tokens;
    if (!long_started) return true;
    ++tokens_during_long_prefill;
    return true;
  };
  SequenceCallbacks long_one;
  bool long_has_token = false;
  long_one.on_token = [&](int32_t) {
    long_has_token = true;
    return false;
  };
  engine.submit(request_for(*model, 0, 100), std::move(decoding));
  while (decoding_tokens == 0) ASSERT_TRUE(engine.step());
  constexpr int64_t kLong = 200;  // 25 batches of n_batch 8
  engine.submit(request_for(*model, 1, 4, kLong), std::move(long_one));
  long_started = true;
  int steps = 0;
  for (; !long_has_token; ++steps) ASSERT_TRUE(engine.step());
  EXPECT_EQ(steps, kLong / session_options().n_batch);
  EXPECT_GE(tokens_during_long_prefill, steps - 1);
  step_until_idle(engine);
}

// A press that evicts each layer as soon as the whole prompt has passed it never holds the
// prompt in every layer, and admission counts that: a request whose prompt alone needs
// twice the cap runs (one layer's prompt beside every layer's budget fits), its cache stays
// under the cap at its peak, and it gets generate()'s tokens. Evicting only after the
// prefill, it would be refused as never fitting.
TEST_P(BatchEngineTest, ALayerByLayerPressRunsAPromptOfTwiceTheCap) {
  constexpr int64_t kLong = 200;
  const int64_t per_token = BatchEngine(model, pool, options(1, 1)).kv_bytes_per_token();
  const int64_t cap = kLong * per_token / 2;
  ASSERT_GE(model->config().n_layer, 3) << "one layer's prompt beside the budgets would not fit";
  BatchEngine engine(model, pool, options(2, cap));
  const auto request = [&] {
    SequenceRequest r = request_for(*model, 0, kNewTokens, kLong);
    r.budget = KvBudget::per_head(kBudget);
    r.press = make_press("snapkv:window=4", r.budget);
    return r;
  };
  std::optional<SequenceOutcome> outcome;
  SequenceCallbacks cb;
  cb.on_finish = [&](const SequenceOutcome& o) { outcome = o; };
  engine.submit(request(), std::move(cb));
  step_until_idle(engine);
  ASSERT_TRUE(outcome.has_value());
  ASSERT_TRUE(outcome->error.empty()) << outcome->error;
  EXPECT_LE(outcome->kv_peak_bytes, cap);

  Session session(model, pool, session_options());
  SequenceRequest r = request();
  session.set_press(std::move(r.press));
  Sampler sampler(r.sampling);
  GenerateOptions o;
  o.n_predict = r.max_tokens;
  o.stop_at_end_of_generation = false;
  EXPECT_EQ(outcome->result.tokens, generate(session, r.prompt, o, sampler).tokens);
  EXPECT_EQ(outcome->kv_peak_bytes, kv_cache_of(session).peak_bytes());
}

TEST_P(BatchEngineTest, ARequestThatCanNeverFitIsRefused) {
  BatchEngine engine(model, pool, options(4, 1000));
  try {
    engine.submit(request_for(*model, 0), {});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--kv-memory"), std::string::npos) << e.what();
  }
  EXPECT_EQ(engine.stats().waiting, 0);
}

// No max_tokens (-1: up to the context's end) under a cap that cannot hold the whole
// context: the request is given the tokens that fit, not refused, and generates exactly
// those; with room for the whole context it runs to the context's end.
TEST_P(BatchEngineTest, WithoutATokenLimitARequestGetsWhatTheCapHolds) {
  const int64_t per_token = BatchEngine(model, pool, options(1, 1)).kv_bytes_per_token();
  constexpr int64_t kFits = 60;  // prompt + new tokens the cap holds, of the 256-token context
  BatchEngine engine(model, pool, options(2, kFits * per_token));
  std::optional<SequenceOutcome> capped;
  SequenceCallbacks cb;
  cb.on_finish = [&capped](const SequenceOutcome& o) { capped = o; };
  SequenceRequest r = request_for(*model, 0);
  r.max_tokens = -1;
  engine.submit(std::move(r), std::move(cb));
  step_until_idle(engine);
  ASSERT_TRUE(capped.has_value());
  EXPECT_TRUE(capped->error.empty()) << capped->error;
  EXPECT_EQ(static_cast<int64_t>(capped->result.tokens.size()), kFits - kPromptTokens);
  EXPECT_EQ(capped->result.stop, StopReason::kTokenLimit);

  BatchEngine roomy(model, pool, options(2, int64_t{1} << 30));
  std::optional<SequenceOutcome> whole;
  SequenceCallbacks cb2;
  cb2.on_finish = [&whole](const SequenceOutcome& o) { whole = o; };
  SequenceRequest r2 = request_for(*model, 0);
  r2.max_tokens = -1;
  roomy.submit(std::move(r2), std::move(cb2));
  step_until_idle(roomy);
  ASSERT_TRUE(whole.has_value());
  // The context holds n_ctx - prompt generated tokens; one more is sampled from the last of
  // them and reported, never stored (as generate() ends at a full context).
  EXPECT_EQ(static_cast<int64_t>(whole->result.tokens.size()), session_options().n_ctx - kPromptTokens + 1);
  EXPECT_EQ(whole->result.stop, StopReason::kContextFull);
}

// Logprobs asked for: one report a token, before its on_token, for the token it reports,
// with the asked number of alternatives; at temperature 0 the chosen token is the likeliest.
TEST_P(BatchEngineTest, LogprobsComeWithEachTokenBeforeIt) {
  BatchEngine engine(model, pool, options(2, int64_t{1} << 30));
  std::vector<TokenLogprobs> reported;
  std::vector<int32_t> tokens;
  bool ordered = true;
  std::optional<SequenceOutcome> outcome;
  SequenceCallbacks cb;
  cb.on_logprobs = [&](const TokenLogprobs& lp) { reported.push_back(lp); };
  cb.on_token = [&](int32_t token) {
    ordered = ordered && reported.size() == tokens.size() + 1 && reported.back().token == token;
    tokens.push_back(token);
    return true;
  };
  cb.on_finish = [&outcome](const SequenceOutcome& o) { outcome = o; };
  SequenceRequest r = request_for(*model, 0);
  r.logprobs = 3;
  engine.submit(std::move(r), std::move(cb));
  step_until_idle(engine);
  ASSERT_TRUE(outcome.has_value());
  EXPECT_TRUE(ordered);
  ASSERT_EQ(reported.size(), static_cast<size_t>(kNewTokens));
  for (const TokenLogprobs& lp : reported) {
    ASSERT_EQ(lp.top.size(), 3u);
    EXPECT_EQ(lp.top[0].first, lp.token);  // greedy
    EXPECT_FLOAT_EQ(lp.top[0].second, lp.logprob);
    EXPECT_LE(lp.logprob, 0.0f);
    EXPECT_GE(lp.top[0].second, lp.top[1].second);
    EXPECT_GE(lp.top[1].second, lp.top[2].second);
  }
  EXPECT_EQ(outcome->result.tokens, generated_alone(model, pool, 0));  // logprobs change nothing
}

// Cancelled mid-generation: no token after the step it was cancelled in, its KV freed at
// once, and the sequence beside it still gets its generate() tokens.
TEST_P(BatchEngineTest, CancellingStopsWithinOneStepAndFreesItsKv) {
  BatchEngine engine(model, pool, options(4, int64_t{1} << 30));
  int tokens = 0;
  int64_t used_before = 0;
  int64_t used_after = -1;
  SequenceId id = 0;
  std::map<int, SequenceOutcome> outcomes;
  SequenceCallbacks cancelled;
  cancelled.on_token = [&](int32_t) {
    if (++tokens == 3) {
      used_before = engine.stats().kv_bytes_used;
      engine.cancel(id);
    }
    return true;
  };
  cancelled.on_finish = [&](const SequenceOutcome& o) {
    outcomes[1] = o;
    used_after = engine.stats().kv_bytes_used;
  };
  SequenceCallbacks other;
  other.on_finish = [&](const SequenceOutcome& o) { outcomes[0] = o; };
  SequenceRequest long_one = request_for(*model, 1, 100);  // the full cache
  long_one.press.reset();
  engine.submit(request_for(*model, 0), std::move(other));
  id = engine.submit(std::move(long_one), std::move(cancelled));
  step_until_idle(engine);
  ASSERT_EQ(outcomes.size(), 2u);
  EXPECT_TRUE(outcomes[1].cancelled);
  EXPECT_EQ(tokens, 3);
  EXPECT_EQ(outcomes[1].result.tokens.size(), 3u);
  EXPECT_GT(used_before, 0);
  EXPECT_LT(used_after, used_before);  // only the other sequence's, if it still runs
  EXPECT_EQ(outcomes[0].result.tokens, generated_alone(model, pool, 0));
  EXPECT_EQ(engine.stats().kv_bytes_used, 0);
}

// A waiting sequence cancelled before it ever ran finishes at the next step, never
// started (on_start is not called, outcome.started is false); the one that ran started
// once, before its first token.
TEST_P(BatchEngineTest, CancellingAWaitingSequenceFinishesIt) {
  BatchEngine engine(model, pool, options(1, int64_t{1} << 30));
  bool finished = false;
  int starts = 0;
  int tokens_before_start = 0;
  bool first_started = false;
  SequenceCallbacks cb;
  cb.on_start = [&] { ++starts; };
  cb.on_finish = [&](const SequenceOutcome& o) {
    finished = true;
    EXPECT_TRUE(o.cancelled);
    EXPECT_FALSE(o.started);
    EXPECT_TRUE(o.result.tokens.empty());
  };
  SequenceCallbacks first;
  first.on_start = [&] { ++starts; };
  first.on_token = [&](int32_t) {
    if (starts == 0) ++tokens_before_start;
    return true;
  };
  first.on_finish = [&](const SequenceOutcome& o) { first_started = o.started; };
  engine.submit(request_for(*model, 0), std::move(first));
  const SequenceId waiting = engine.submit(request_for(*model, 1), std::move(cb));
  engine.step();  // the first runs; the second waits for the only place
  EXPECT_EQ(engine.stats().waiting, 1);
  engine.cancel(waiting);
  engine.step();
  EXPECT_TRUE(finished);
  EXPECT_EQ(engine.stats().waiting, 0);
  step_until_idle(engine);
  EXPECT_EQ(starts, 1);
  EXPECT_EQ(tokens_before_start, 0);
  EXPECT_TRUE(first_started);
}

TEST_P(BatchEngineTest, ABadPromptFailsItsSequenceOnly) {
  BatchEngine engine(model, pool, options(4, int64_t{1} << 30));
  std::map<int, SequenceOutcome> outcomes;
  SequenceRequest bad = request_for(*model, 1);
  bad.prompt.push_back(static_cast<int32_t>(model->config().n_vocab));  // out of the vocabulary
  for (int i = 0; i < 2; ++i) {
    SequenceCallbacks cb;
    cb.on_finish = [&outcomes, i](const SequenceOutcome& o) { outcomes[i] = o; };
    engine.submit(i == 0 ? request_for(*model, 0) : std::move(bad), std::move(cb));
  }
  step_until_idle(engine);
  EXPECT_NE(outcomes[1].error.find("out of the vocabulary"), std::string::npos) << outcomes[1].error;
  EXPECT_TRUE(outcomes[0].error.empty());
  EXPECT_EQ(outcomes[0].result.tokens, generated_alone(model, pool, 0));
}

INSTANTIATE_TEST_SUITE_P(Models, BatchEngineTest,
                         ::testing::Values(testing::stories_model_path(), embedded_eval_model_path()),
                         [](const auto& info) { return info.index == 0 ? "stories260K" : "in_house"; });

}  // namespace
}  // namespace deferkv
