#include "deferkv/session.h"
#include "engine/session_internals.h"

#include <gtest/gtest.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "base/thread_pool.h"
#include "deferkv/error.h"
#include "deferkv/generate.h"
#include "deferkv/tokenizer.h"
#include "kv/kv_cache.h"
#include "model/reference_forward.h"
#include "model/test_models.h"

namespace deferkv {
namespace {

std::shared_ptr<ThreadPool> pool() { return std::make_shared<ThreadPool>(2); }

nlohmann::json stories_reference() {
  std::ifstream in(std::string(DEFERKV_TEST_DATA) + "/reference/stories260K_greedy.json");
  return nlohmann::json::parse(in);
}

// The references ran llama.cpp with an f32 KV cache; so do these tests.
SessionOptions f32_cache() {
  SessionOptions options;
  options.cache_type_k = "f32";
  options.cache_type_v = "f32";
  return options;
}

// The generated tokens as llama.cpp prints them after the prompt: a continuation keeps the
// space its first token starts with.
std::string continuation_text(const Tokenizer& tokenizer, const std::vector<int32_t>& ids) {
  StreamingDecoder decoder(tokenizer, DecodeStart::kContinuation);
  std::string text;
  for (int32_t id : ids) text += decoder.push(id);
  return text + decoder.finish();
}

// The embedded model's greedy continuations equal llama.cpp's (and llama2.c's).
TEST(Stories260K, GreedyContinuationEqualsReferenceEngines) {
  auto model = Model::load(testing::stories_model_path());
  const nlohmann::json reference = stories_reference();  // a local: the loop must not outlive it
  ASSERT_GE(reference["cases"].size(), 4u);
  for (const auto& c : reference["cases"]) {
    const auto prompt_ids = model->tokenizer().encode(c["prompt"].get<std::string>(), true, false);
    EXPECT_EQ(prompt_ids, c["prompt_ids"].get<std::vector<int32_t>>()) << c["prompt"];
    Session session(model, pool(), f32_cache());
    SamplerParams greedy;
    greedy.temperature = 0.0f;
    Sampler sampler(greedy);
    GenerateOptions options;
    options.n_predict = static_cast<int64_t>(c["generated_ids"].size());
    const GenerateResult result = generate(session, prompt_ids, options, sampler);
    EXPECT_EQ(result.tokens, c["generated_ids"].get<std::vector<int32_t>>()) << c["prompt"];
    EXPECT_EQ(continuation_text(model->tokenizer(), result.tokens), c["generated_text"].get<std::string>());
  }
}

TEST(Stories260K, PromptLogitsEqualLlamaCpp) {
  auto model = Model::load(testing::stories_model_path());
  const nlohmann::json reference = stories_reference();
  ASSERT_GE(reference["cases"].size(), 4u);
  for (const auto& c : reference["cases"]) {
    std::ifstream in(std::string(DEFERKV_TEST_DATA) + "/reference/" + c["logits_file"].get<std::string>(),
                     std::ios::binary);
    std::vector<float> expected(static_cast<size_t>(model->config().n_vocab));
    in.read(reinterpret_cast<char*>(expected.data()), static_cast<std::streamsize>(expected.size() * 4));
    ASSERT_TRUE(in) << c["logits_file"];
    Session session(model, pool(), f32_cache());
    session.prefill(c["prompt_ids"].get<std::vector<int32_t>>());
    const std::vector<double> reference_logits(expected.begin(), expected.end());
    EXPECT_LT(testing::relative_l2(session.last_logits(), reference_logits), 1e-5) << c["prompt"];
  }
}

TEST(Session, PromptLongerThanContextIsAClearErrorAndChangesNothing) {
  auto model = Model::load(testing::stories_model_path());
  SessionOptions options;
  options.n_ctx = 8;
  Session session(model, pool(), options);
  session.prefill({1, 403, 407});
  try {
    session.prefill(std::vector<int32_t>(6, 261));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("do not fit in the context of 8"), std::string::npos) << e.what();
  }
  EXPECT_EQ(session.n_past(), 3);
  EXPECT_EQ(kv_cache_of(session).length(0, 0), 3);
  session.decode(261);  // still usable
  EXPECT_EQ(session.n_past(), 4);
}

TEST(Session, TokenOutsideVocabularyIsRejected) {
  auto model = Model::load(testing::stories_model_path());
  Session session(model, pool());
  EXPECT_THROW(session.prefill({1, 512}), Error);
  EXPECT_THROW(session.prefill({-3}), Error);
  EXPECT_EQ(session.n_past(), 0);
  session.prefill({1, 403});
  EXPECT_THROW(session.decode(512), Error);
  EXPECT_THROW(session.decode(-1), Error);
  EXPECT_EQ(session.n_past(), 2);
}

TEST(Session, RollbackRefusesAnotherModelsCheckpoint) {
  auto stories = Model::load(testing::stories_model_path());
  auto other = Model::load(testing::stories_model_path());  // the same file, another model object
  Session a(stories, pool()), b(other, pool());
  a.prefill({1, 403, 407});
  b.prefill({1, 261});
  const auto saved = a.checkpoint();
  try {
    b.rollback(*saved);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("another model"), std::string::npos) << e.what();
  }
  EXPECT_EQ(b.n_past(), 2);
  a.decode(261);
  a.rollback(*saved);
  EXPECT_EQ(a.n_past(), 3);
}

TEST(Session, TruncateRollsBackToTheSameLogits) {
  auto model = Model::load(testing::stories_model_path());
  Session session(model, pool());
  session.prefill({1, 403, 407, 261});
  session.decode(378);
  const std::vector<float> first(session.last_logits(), session.last_logits() + 512);
  session.decode(432);
  session.decode(383);
  session.truncate(4);
  EXPECT_EQ(session.n_past(), 4);
  EXPECT_EQ(kv_cache_of(session).length(2, 1), 4);
  session.decode(378);
  for (int i = 0; i < 512; ++i) EXPECT_EQ(first[i], session.last_logits()[i]);
}

TEST(Session, CacheStoresOriginalPositionsAndCountsBytes) {
  auto model = Model::load(testing::stories_model_path());
  Session session(model, pool());
  session.prefill({1, 403, 407});
  session.decode(261);
  const KvCache& kv = kv_cache_of(session);
  const ModelConfig& c = model->config();
  for (int64_t l = 0; l < c.n_layer; ++l) {
    for (int64_t g = 0; g < c.n_head_kv; ++g) {
      ASSERT_EQ(kv.length(l, g), 4);
      for (int i = 0; i < 4; ++i) EXPECT_EQ(kv.positions(l, g)[i], i);
    }
  }
  const int64_t per_entry = 2 * c.head_dim * 2 + 4;  // the default f16 cache: 2 bytes a value, and a position
  EXPECT_EQ(kv.bytes_held(), c.n_layer * c.n_head_kv * 4 * per_entry);
  EXPECT_EQ(kv.peak_bytes(), kv.bytes_held());
}

}  // namespace
}  // namespace deferkv
