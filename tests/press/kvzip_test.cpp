// KVzip: the kept set against the method's rule evaluated here in double precision on the
// reference forward (model/reference_forward.h) run over the context followed by each
// chunk's reconstruction input, the cache and logits after the eviction, the
// question-agnostic path, and its refusals.
//
// Mutants applied to src/press/methods/kvzip.cpp, run, seen failing, reverted:
//   the mean over the reconstruction queries instead of the max
//     (RowReduction::kWeightedSum)                              -> KeptSetIsTheReferenceMaxAttention*
//   the request left out of the reconstruction input           -> KeptSetIsTheReferenceMaxAttention*
//   the softmax over every entry before the chunk (as sinks), not
//     the first n_sink only                                     -> KeptSetIsTheReferenceMaxAttention*
//   (each failed both kept-set tests; the other tests passed)
// and to src/engine/session_press_host.cpp: the chat frame never offered (the prompt read
//   as plain, the request closed by "\n")                      -> APromptInTheChatFormIsRepeatedInIt
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <numeric>
#include <random>

#include <fmt/format.h>

#include "base/thread_pool.h"
#include "deferkv/error.h"
#include "deferkv/tokenizer.h"
#include "engine/session_internals.h"
#include "kv/kv_cache.h"
#include "model/reference_forward.h"
#include "press/kept_set_reference.h"
#include "press/press_test_util.h"
#include "tensor/gguf_file.h"
#include "tensor/gguf_writer.h"

namespace deferkv {
namespace {

using testing::best;
using testing::Positions;
using testing::Scores;

const testing::AttentionShape kShape{4, 2, 32};  // press_test_model_path()'s
constexpr int64_t kLayers = 3, kSinks = 4;

std::shared_ptr<const Model> test_model() {
  static const auto model = Model::load(testing::press_test_model_path());
  return model;
}

// BOS, then distinct text tokens (no two context keys alike): a plain prompt whose text
// starts after its BOS.
std::vector<int32_t> plain_prompt(int64_t text_tokens) {
  std::vector<int32_t> ids(400);
  std::iota(ids.begin(), ids.end(), 3);
  std::shuffle(ids.begin(), ids.end(), std::mt19937(17));
  std::vector<int32_t> prompt{test_model()->tokenizer().bos_id()};
  prompt.insert(prompt.end(), ids.begin(), ids.begin() + text_tokens);
  return prompt;
}

// KVzip's rule, from its definition (docs/methods/kvzip.md): chunk i of the text
// [text_begin, T) is fed after the prompt as request_i + closing + the chunk (the closing
// "\n" for a plain prompt); every query of that input, per query head, takes the softmax
// over the sinks [0, min(n_sink, begin)), the chunk's entries and the input's own keys up
// to it; an entry scores the max over its KV head's query heads and those queries.
// [layer][g][position]; the opening (BOS, a chat header) scores 0.
std::vector<std::vector<Scores>> reference_scores(const std::string& model_path, const std::vector<int32_t>& prompt,
                                                  int64_t chunk, int64_t text_begin = 1,
                                                  const std::string& closing_text = "\n") {
  const Tokenizer& tokenizer = test_model()->tokenizer();
  const auto first_request = tokenizer.encode("\n\nRepeat the previous context exactly.", false, false);
  const auto next_request =
      tokenizer.encode("\n\nRepeat the part of the previous context exactly, starting with", false, false);
  const auto closing = tokenizer.encode(closing_text, false, true);
  const auto t = static_cast<int64_t>(prompt.size());
  std::vector<std::vector<Scores>> scores(kLayers, std::vector<Scores>(2, Scores(static_cast<size_t>(t), 0.0)));
  for (int64_t begin = text_begin; begin < t; begin += chunk) {
    const int64_t end = std::min(t, begin + chunk);
    std::vector<int32_t> tokens = prompt;
    if (begin == text_begin) {
      tokens.insert(tokens.end(), first_request.begin(), first_request.end());
    } else {
      tokens.insert(tokens.end(), next_request.begin(), next_request.end());
      tokens.insert(tokens.end(), prompt.begin() + std::max<int64_t>(text_begin, begin - 8), prompt.begin() + begin);
    }
    tokens.insert(tokens.end(), closing.begin(), closing.end());
    tokens.insert(tokens.end(), prompt.begin() + begin, prompt.begin() + end);
    const auto trace = testing::reference_trace(model_path, tokens, testing::ReferenceRows{});
    Positions keys = testing::span(0, std::min(kSinks, begin));
    const Positions chunk_keys = testing::span(begin, end);
    keys.insert(keys.end(), chunk_keys.begin(), chunk_keys.end());
    const auto sinks = static_cast<int64_t>(std::min(kSinks, begin));
    for (int64_t q = t; q < static_cast<int64_t>(tokens.size()); ++q) {
      keys.push_back(static_cast<int32_t>(q));  // the input's own keys, causal
      for (int64_t l = 0; l < kLayers; ++l) {
        for (int64_t h = 0; h < kShape.n_head; ++h) {
          const Scores p = testing::attention_row(trace, kShape, l, h, q, keys);
          Scores& s = scores[l][h / kShape.group()];
          for (int64_t j = begin; j < end; ++j) s[j] = std::max(s[j], p[sinks + j - begin]);
        }
      }
    }
  }
  return scores;
}

// What each head keeps of the prompt: the sinks, then its count of the best other entries.
Positions kept_by_reference(const Scores& s, int64_t count) {
  Positions kept = testing::span(0, kSinks);
  for (int32_t j : best(Scores(s.begin() + kSinks, s.end()), count)) kept.push_back(j + static_cast<int32_t>(kSinks));
  return kept;
}

std::unique_ptr<Session> kvzip_session(const std::string& spec, const KvBudget& budget, int64_t n_ctx = 512,
                                       std::shared_ptr<const Model> model = test_model()) {
  SessionOptions options;
  options.n_ctx = n_ctx;
  options.n_batch = 16;  // the reconstruction input runs in several batches
  options.cache_type_k = options.cache_type_v = "f32";
  auto session = std::make_unique<Session>(std::move(model), std::make_shared<ThreadPool>(2), options);
  session->set_press(make_press(spec, budget));
  return session;
}

Positions kept_positions(const Session& session, int64_t l, int64_t g) {
  const KvCache& kv = kv_cache_of(session);
  return Positions(kv.positions(l, g), kv.positions(l, g) + kv.length(l, g));
}

constexpr int64_t kText = 40, kChunk = 16, kBudget = 20;

// Under its default allocation (AdaKV with no floor): the layer's G * (b - sinks) best
// scores of its heads decide each head's count.
TEST(Kvzip, KeptSetIsTheReferenceMaxAttentionUnderAdaKvWithoutFloor) {
  const auto prompt = plain_prompt(kText);
  const auto reference = reference_scores(testing::press_test_model_path(), prompt, kChunk);
  auto session = kvzip_session("kvzip:chunk_size=16", KvBudget::per_head(kBudget));
  session->prefill(prompt);
  ASSERT_TRUE(session->last_eviction().has_value());
  for (int64_t l = 0; l < kLayers; ++l) {
    std::vector<Scores> candidates;
    for (int64_t g = 0; g < 2; ++g) candidates.emplace_back(reference[l][g].begin() + kSinks, reference[l][g].end());
    const std::vector<int64_t> counts = testing::adakv_budgets(candidates, kBudget - kSinks, 0.0);
    int64_t total = 0;
    for (int64_t g = 0; g < 2; ++g) {
      total += counts[g];
      EXPECT_EQ(kept_positions(*session, l, g), kept_by_reference(reference[l][g], counts[g]))
          << "layer " << l << " head " << g;
    }
    EXPECT_EQ(total, 2 * (kBudget - kSinks));
  }
}

// Every shared allocation applies: uniform keeps each head's b - sinks best.
TEST(Kvzip, KeptSetIsTheReferenceMaxAttentionUnderUniformAllocation) {
  const auto prompt = plain_prompt(kText);
  const auto reference = reference_scores(testing::press_test_model_path(), prompt, kChunk);
  auto session = kvzip_session("kvzip:chunk_size=16,alloc=uniform", KvBudget::per_head(kBudget));
  session->prefill(prompt);
  for (int64_t l = 0; l < kLayers; ++l) {
    for (int64_t g = 0; g < 2; ++g) {
      EXPECT_EQ(kept_positions(*session, l, g), kept_by_reference(reference[l][g], kBudget - kSinks))
          << "layer " << l << " head " << g;
    }
  }
}

// The press test model with a ChatML chat template: its prompts in the chat form open with
// "<|im_start|>user\n" (after BOS) and the request closes the user's turn as ChatML does.
std::string chat_model_path() {
  const std::string path = testing::press_test_model_path() + "-chatml.gguf";
  if (std::filesystem::exists(path)) return path;
  GgufFile source(testing::press_test_model_path());
  GgufWriter writer;
  for (const auto& [key, value] : source.metadata()) writer.add_metadata(key, value);
  writer.add_metadata("tokenizer.chat_template",
                      GgufValue::of_string("{% for m in messages %}{{'<|im_start|>' + m['role'] + '\\n' + m['content'] + "
                                           "'<|im_end|>' + '\\n'}}{% endfor %}{{ '<|im_start|>assistant\\n' }}"));
  for (const auto& t : source.tensors()) {
    writer.add_tensor(t.name, t.ggml_type, std::vector<int64_t>(t.ne.begin(), t.ne.begin() + t.n_dims), t.data,
                      t.nbytes);
  }
  writer.write(path);
  return path;
}

// A prompt in the chat form is repeated from its text on, the request closed as the
// template closes a user's turn.
TEST(Kvzip, APromptInTheChatFormIsRepeatedInIt) {
  const std::string path = chat_model_path();
  const auto model = Model::load(path);
  std::vector<int32_t> prompt = model->tokenizer().encode("<|im_start|>user\n", true, true);
  const auto text_begin = static_cast<int64_t>(prompt.size());
  const auto text = plain_prompt(kText);
  prompt.insert(prompt.end(), text.begin() + 1, text.end());
  const auto reference =
      reference_scores(path, prompt, kChunk, text_begin, "<|im_end|>\n<|im_start|>assistant\n");
  auto session = kvzip_session("kvzip:chunk_size=16,alloc=uniform", KvBudget::per_head(kBudget), 512, model);
  session->prefill(prompt);
  for (int64_t l = 0; l < kLayers; ++l) {
    for (int64_t g = 0; g < 2; ++g) {
      EXPECT_EQ(kept_positions(*session, l, g), kept_by_reference(reference[l][g], kBudget - kSinks))
          << "layer " << l << " head " << g;
    }
  }
}

// The reconstruction leaves no entry, position or logit behind: y_1 comes from the prompt's
// own logits, and decoding attends to the kept entries only.
TEST(Kvzip, CacheAndLogitsAreThoseOfAPrefillWithoutTheReconstruction) {
  const auto prompt = plain_prompt(kText);
  const auto run = testing::run_press("kvzip:chunk_size=16", KvBudget::per_head(kBudget), prompt, 3);
  const auto full = testing::run_press("full", {}, prompt, 0);
  EXPECT_EQ(run.logits.front(), full.logits.front());
  EXPECT_EQ(run.session->n_past(), kText + 1 + 3);
  EXPECT_GT(run.session->timings().lookahead_seconds, 0.0);
  const auto t = static_cast<int64_t>(prompt.size());
  std::vector<int32_t> tokens = prompt;
  tokens.insert(tokens.end(), run.generated.begin(), run.generated.end() - 1);
  const auto& kept = run.positions;
  const auto reference = testing::reference_logits(
      testing::press_test_model_path(), tokens, [&](int64_t l, int64_t g, int64_t key, int64_t query) {
        if (query < t || key >= t) return true;
        return std::binary_search(kept[l][g].begin(), kept[l][g].end(), static_cast<int32_t>(key));
      });
  for (size_t s = 0; s < run.logits.size(); ++s) {
    EXPECT_LT(testing::relative_l2(run.logits[s].data(), reference[t - 1 + s]), 1e-4) << "step " << s;
  }
}

// Question-agnostic: the context alone is reconstructed and compressed, as a prefill of the
// context alone would be; the question's entries are all kept.
TEST(Kvzip, QuestionAgnosticCompressesTheContextAlone) {
  const auto context = plain_prompt(kText);
  const std::vector<int32_t> question = testing::random_prompt(6, 9);
  const auto alone = testing::run_press("kvzip:chunk_size=16", KvBudget::per_head(kBudget), context, 0);
  const auto agnostic = testing::run_press_with_question(testing::press_test_model_path(), "kvzip:chunk_size=16",
                                                         KvBudget::per_head(kBudget), context, question, true, 0);
  const auto t = static_cast<int32_t>(context.size());
  for (int64_t l = 0; l < kLayers; ++l) {
    for (int64_t g = 0; g < 2; ++g) {
      Positions expected = alone.positions[l][g];
      for (int32_t p = t; p < t + 6; ++p) expected.push_back(p);
      EXPECT_EQ(agnostic.positions[l][g], expected) << "layer " << l << " head " << g;
    }
  }
}

// A context that cannot hold the prompt, a request and a chunk after it is refused before
// the prefill runs, naming the positions; a smaller chunk fits.
TEST(Kvzip, AContextWithoutRoomForTheReconstructionIsRefused) {
  const auto prompt = plain_prompt(kText);  // 41 tokens
  auto session = kvzip_session("kvzip", KvBudget::per_head(kBudget), 64);
  const int64_t needed = session->press_positions_after_prompt(41);
  EXPECT_GT(needed, 41);  // the whole text fits one chunk of 2048: 41 + the request's
  try {
    session->prefill(prompt);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(fmt::format("the prompt's 41 tokens and the {} positions press 'kvzip", needed)),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(session->n_past(), 0);
  // The request and closing, then a chunk of 8: exactly the room it declares fits.
  auto smaller = kvzip_session("kvzip:chunk_size=8", KvBudget::per_head(kBudget), needed + 8);
  EXPECT_EQ(smaller->press_positions_after_prompt(41), needed - 41 + 8);
  smaller->prefill(prompt);
  EXPECT_TRUE(smaller->last_eviction().has_value());
}

TEST(Kvzip, ASecondPromptIsRefusedByName) {
  auto session = kvzip_session("kvzip:chunk_size=16", KvBudget::per_head(kBudget));
  session->prefill(plain_prompt(kText));
  try {
    session->prefill(testing::random_prompt(30, 4));
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("compresses a session's first prompt only"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace deferkv
