// LookaheadKV: the learned rows through the session and the forward pass (their scores
// against a double-precision reference that applies the LoRA deltas by hand, and against
// the trainer's PyTorch on weights it trained), the prompt's cache and logits left
// untouched, the eviction and the generation after it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "base/thread_pool.h"
#include "deferkv/error.h"
#include "engine/session_internals.h"
#include "kv/kv_cache.h"
#include "model/reference_forward.h"
#include "model/test_models.h"
#include "model/weights_import.h"
#include "observe/attention_tap.h"
#include "press/lookahead_test_util.h"
#include "press/methods/lookaheadkv/lookahead_attention.h"
#include "press/press_test_util.h"
#include "support/read_file.h"
#include "tensor/gguf_test_util.h"

namespace deferkv {
namespace {

constexpr int64_t kPrompt = 90;
constexpr int64_t kRows = 5;

// A 2-layer GQA model (4 query heads, 2 KV heads, head_dim 16).
std::string small_model_path() {
  RandomModelSpec spec;
  spec.n_embd = 64;
  spec.n_layer = 2;
  spec.n_head = 4;
  spec.n_head_kv = 2;
  spec.n_ff = 96;
  spec.seed = 23;
  return testing::random_model_path(spec);
}

std::unique_ptr<Session> small_session(int64_t n_batch, int64_t n_ctx = 256) {
  SessionOptions options;
  options.n_ctx = n_ctx;
  options.n_batch = n_batch;
  options.cache_type_k = options.cache_type_v = "f32";  // compared at float32 precision
  return std::make_unique<Session>(Model::load(small_model_path()), std::make_shared<ThreadPool>(2), options);
}

// Has the session run its rows after every prompt and records what a press sees: the
// rows' attention on the prompt (mean over the rows and each group, as lookaheadkv
// scores), the positions the forward pass showed it, and the cache once the rows ran.
class RowProbe final : public Press {
 public:
  explicit RowProbe(LookaheadRows rows) : rows_(std::move(rows)) {}
  std::string describe() const override { return "row-probe"; }
  void on_attach(const PressModelShape&, PressHost& host) override {
    host.reserve_after_prompt(rows_.n_rows());
    host_ = &host;
  }
  PressPoints points() const override { return {PressPoint::kPromptBegin, PressPoint::kPromptEnd}; }
  void on_attention(const AttentionEvent& event) override { see(event); }
  void act(const PressAt& at, KvCache& cache) override {
    if (at.point == PressPoint::kPromptBegin) {
      attention_.begin(at.first_position + at.n_tokens, 1.0f / static_cast<float>(rows_.n_rows()),
                       GroupReduction::kMean);
      return;
    }
    host_->run_after_prompt(rows_, [this](const AttentionEvent& event) {
      attention_.observe(event);
      see(event);
    });
    for (int64_t l = 0; l < cache.n_layer(); ++l) {
      scores.push_back(attention_.layer(l));
      for (int64_t g = 0; g < cache.n_head_kv(); ++g) {
        last_position_at_eviction = std::max<int64_t>(last_position_at_eviction,
                                                      cache.positions(l, g)[cache.length(l, g) - 1]);
      }
    }
  }

  std::vector<std::vector<std::vector<float>>> scores;  // [layer][g][prompt entry]
  int64_t last_position_seen = -1;
  int64_t last_position_at_eviction = -1;

 private:
  void see(const AttentionEvent& event) {
    last_position_seen = std::max<int64_t>(last_position_seen, event.positions[event.n - 1]);
  }

  LookaheadRows rows_;
  LookaheadAttention attention_;
  PressHost* host_ = nullptr;
};

// [layer][g][j]: mean over the rows and over g's query heads of softmax over the prompt
// keys of q_row . k_j / sqrt(d), from the reference's queries and keys.
std::vector<std::vector<std::vector<double>>> reference_scores(const testing::ReferenceTrace& trace,
                                                               const PressModelShape& s) {
  const int64_t group = s.n_head / s.n_head_kv;
  const double scale = 1.0 / std::sqrt(static_cast<double>(s.head_dim));
  std::vector<std::vector<std::vector<double>>> out(static_cast<size_t>(s.n_layer));
  for (int64_t l = 0; l < s.n_layer; ++l) {
    out[l].assign(static_cast<size_t>(s.n_head_kv), std::vector<double>(kPrompt, 0.0));
    for (int64_t r = 0; r < kRows; ++r) {
      const auto& q = trace.queries[l][static_cast<size_t>(kPrompt + r)];
      for (int64_t h = 0; h < s.n_head; ++h) {
        const int64_t g = h / group;
        std::vector<double> logits(kPrompt);
        for (int64_t j = 0; j < kPrompt; ++j) {
          double dot = 0;
          for (int64_t d = 0; d < s.head_dim; ++d) dot += q[h * s.head_dim + d] * trace.keys[l][j][g * s.head_dim + d];
          logits[j] = dot * scale;
        }
        const double max = *std::max_element(logits.begin(), logits.end());
        double sum = 0;
        for (double& v : logits) sum += (v = std::exp(v - max));
        for (int64_t j = 0; j < kPrompt; ++j) out[l][g][j] += logits[j] / sum / static_cast<double>(kRows * group);
      }
    }
  }
  return out;
}

// Runs the probe's rows after the prompt; returns the probe's record.
const RowProbe& probe_prompt(Session& session, const LookaheadWeights& w, const std::vector<int32_t>& prompt) {
  session.set_press(std::make_unique<RowProbe>(w.rows));
  session.prefill(prompt);
  return *dynamic_cast<const RowProbe*>(session.press());
}

void expect_scores_match(const RowProbe& probe, const std::vector<std::vector<std::vector<double>>>& reference) {
  ASSERT_EQ(probe.scores.size(), reference.size());
  for (size_t l = 0; l < reference.size(); ++l) {
    ASSERT_EQ(probe.scores[l].size(), reference[l].size());
    for (size_t g = 0; g < reference[l].size(); ++g) {
      ASSERT_EQ(probe.scores[l][g].size(), static_cast<size_t>(kPrompt));
      double total = 0;
      for (int64_t j = 0; j < kPrompt; ++j) {
        EXPECT_NEAR(probe.scores[l][g][j], reference[l][g][j], 1e-6 + 1e-4 * reference[l][g][j])
            << "layer " << l << " head " << g << " entry " << j;
        total += probe.scores[l][g][j];
      }
      EXPECT_NEAR(total, 1.0, 1e-4);  // a mean of distributions over the prompt
    }
  }
}

TEST(LookaheadKv, ZeroDeltaRowsScoreAsTheBaseModelOnTheirEmbeddings) {
  const std::string path = small_model_path();
  const PressModelShape shape = testing::model_shape(path);
  const auto prompt = testing::random_prompt(kPrompt, 41);
  // B = 0: every delta is zero (A is not), so the rows are the base model's.
  const LookaheadWeights w = testing::random_lookahead_weights(shape, kRows, 3, 0.0f, 7);
  testing::ReferenceRows base = testing::reference_rows(w);
  base.deltas.clear();
  auto session = small_session(4);  // the rows span two batches
  const RowProbe& probe = probe_prompt(*session, w, prompt);
  expect_scores_match(probe, reference_scores(testing::reference_trace(path, prompt, base), shape));
}

TEST(LookaheadKv, DeltasApplyToTheRowsOnly) {
  const std::string path = small_model_path();
  const PressModelShape shape = testing::model_shape(path);
  const auto prompt = testing::random_prompt(kPrompt, 43);
  const LookaheadWeights w = testing::random_lookahead_weights(shape, kRows, 3, 0.3f, 9);
  auto with_rows = small_session(32);
  const RowProbe& probe = probe_prompt(*with_rows, w, prompt);
  auto plain = small_session(32);
  plain->prefill(prompt);

  // The rows ran after the prompt and were gone before the eviction hook.
  EXPECT_EQ(probe.last_position_seen, kPrompt + kRows - 1);
  EXPECT_EQ(probe.last_position_at_eviction, kPrompt - 1);
  EXPECT_EQ(with_rows->n_past(), kPrompt);
  EXPECT_GT(with_rows->timings().lookahead_seconds, 0.0);
  // The prompt's cache and logits are bit for bit those of a run without rows.
  const KvCache& a = kv_cache_of(*with_rows);
  const KvCache& b = kv_cache_of(*plain);
  EXPECT_EQ(a.bytes_held(), b.bytes_held());
  for (int64_t l = 0; l < a.n_layer(); ++l) {
    for (int64_t g = 0; g < a.n_head_kv(); ++g) {
      ASSERT_EQ(a.length(l, g), kPrompt);
      EXPECT_TRUE(std::equal(a.keys(l, g).row(0), a.keys(l, g).row(kPrompt), b.keys(l, g).row(0))) << l << " " << g;
      EXPECT_TRUE(std::equal(a.values(l, g).row(0), a.values(l, g).row(kPrompt), b.values(l, g).row(0))) << l << " " << g;
    }
  }
  const int64_t n_vocab = with_rows->model().config().n_vocab;
  EXPECT_TRUE(std::equal(with_rows->last_logits(), with_rows->last_logits() + n_vocab, plain->last_logits()));

  // The scores are those of a reference that adds the deltas at the rows by hand ...
  const auto with_deltas = reference_scores(testing::reference_trace(path, prompt, testing::reference_rows(w)), shape);
  expect_scores_match(probe, with_deltas);
  // ... and the deltas matter: without them the scores differ.
  testing::ReferenceRows base = testing::reference_rows(w);
  base.deltas.clear();
  const auto without = reference_scores(testing::reference_trace(path, prompt, base), shape);
  double largest_change = 0;
  for (size_t l = 0; l < without.size(); ++l) {
    for (size_t g = 0; g < without[l].size(); ++g) {
      for (int64_t j = 0; j < kPrompt; ++j) largest_change = std::max(largest_change, std::abs(without[l][g][j] - with_deltas[l][g][j]));
    }
  }
  EXPECT_GT(largest_change, 1e-2);
}

// The trainer and the engine agree on trained weights: tools/train/make_lookahead_fixture.py
// trained rows and deltas for the tiny exported model of tools/train (tiny.safetensors) for a
// few steps, wrote them with lookahead.py's export and recorded PyTorch's rows' attention on
// one prompt, per layer and KV head (mean over the rows and each group, the prompt's softmax
// only). The engine, running the file's rows, must see the same, within float32 rounding.
TEST(LookaheadKv, RowsAttentionMatchesTheTrainersOnItsFixture) {
  const std::string data = std::string(DEFERKV_TEST_DATA) + "/train/";
  gguf_test::TempDir dir;
  const std::string model_path = dir.file("tiny.gguf");
  import_weights({data + "tiny.safetensors", testing::stories_model_path(), model_path, DType::F32, ""});
  const std::string weights_path = data + "tiny_lookahead.gguf";
  const LookaheadWeights w = load_lookahead_weights(weights_path);
  check_lookahead_weights_fit(w, testing::model_shape(model_path), weights_path);
  const auto expected = nlohmann::json::parse(testing::read_file(data + "tiny_lookahead_attention.json"));
  const auto prompt = expected["prompt"].get<std::vector<int32_t>>();
  const auto torch = expected["attention"].get<std::vector<std::vector<std::vector<double>>>>();

  SessionOptions options;
  options.n_ctx = 64;
  options.cache_type_k = options.cache_type_v = "f32";  // compared at float32 precision
  Session session(Model::load(model_path), std::make_shared<ThreadPool>(2), options);
  const RowProbe& probe = probe_prompt(session, w, prompt);
  ASSERT_EQ(probe.scores.size(), torch.size());
  for (size_t l = 0; l < torch.size(); ++l) {
    ASSERT_EQ(probe.scores[l].size(), torch[l].size());
    for (size_t g = 0; g < torch[l].size(); ++g) {
      ASSERT_EQ(probe.scores[l][g].size(), prompt.size());
      for (size_t j = 0; j < prompt.size(); ++j) {
        EXPECT_NEAR(probe.scores[l][g][j], torch[l][g][j], 1e-6 + 1e-4 * torch[l][g][j])
            << "layer " << l << " head " << g << " entry " << j;
      }
    }
  }
}

// max-pool with kernel k (stride 1, out-of-range positions ignored), by hand.
std::vector<double> max_pool(const std::vector<double>& s, int64_t k) {
  std::vector<double> out(s.size());
  for (int64_t j = 0; j < static_cast<int64_t>(s.size()); ++j) {
    out[j] = s[j];
    for (int64_t o = std::max<int64_t>(0, j - k / 2); o <= std::min<int64_t>(s.size() - 1, j + k / 2); ++o) out[j] = std::max(out[j], s[o]);
  }
  return out;
}

TEST(LookaheadKv, EachHeadKeepsTheReferencesTopEntriesAndTheWindow) {
  const std::string path = small_model_path();
  const PressModelShape shape = testing::model_shape(path);
  const auto prompt = testing::random_prompt(kPrompt, 47);
  const LookaheadWeights w = testing::random_lookahead_weights(shape, kRows, 3, 0.3f, 11);
  const std::string weights = path + "-lookahead-kept.gguf";
  save_lookahead_weights(weights, w);
  const auto reference = reference_scores(testing::reference_trace(path, prompt, testing::reference_rows(w)), shape);
  constexpr int64_t kWindow = 8, kBudget = 30;
  for (const std::string pooling : {"none", "max"}) {
    SCOPED_TRACE(pooling);
    auto session = small_session(32);
    session->set_press(make_press("lookaheadkv:window=8,pooling=" + pooling + ",weights=" + weights,
                                  KvBudget::per_head(kBudget)));
    session->prefill(prompt);
    ASSERT_TRUE(session->last_eviction().has_value());
    const KvCache& kv = kv_cache_of(*session);
    for (int64_t l = 0; l < kv.n_layer(); ++l) {
      for (int64_t g = 0; g < kv.n_head_kv(); ++g) {
        const std::vector<int32_t> kept(kv.positions(l, g), kv.positions(l, g) + kv.length(l, g));
        ASSERT_EQ(kept.size(), static_cast<size_t>(kBudget));
        for (int64_t p = kPrompt - kWindow; p < kPrompt; ++p) EXPECT_TRUE(std::binary_search(kept.begin(), kept.end(), p));
        // Every kept candidate scores at least as high as every evicted one (to rounding).
        std::vector<double> s(reference[l][g].begin(), reference[l][g].begin() + (kPrompt - kWindow));
        if (pooling == "max") s = max_pool(s, 7);
        double lowest_kept = 1e9, highest_evicted = -1e9;
        for (int64_t j = 0; j < kPrompt - kWindow; ++j) {
          if (std::binary_search(kept.begin(), kept.end(), static_cast<int32_t>(j))) {
            lowest_kept = std::min(lowest_kept, s[j]);
          } else {
            highest_evicted = std::max(highest_evicted, s[j]);
          }
        }
        EXPECT_GE(lowest_kept, highest_evicted - 1e-6) << "layer " << l << " head " << g;
      }
    }
  }
}

TEST(LookaheadKv, GenerationAfterEvictionMatchesADenseMaskedReference) {
  constexpr int64_t kTokens = 150;
  const auto prompt = testing::random_prompt(kTokens, 13);
  const std::string spec = "lookaheadkv:window=8,weights=" + testing::press_test_lookahead_weights_path();
  const auto run = testing::run_press(spec, KvBudget::per_head(32), prompt, 5);
  const auto full = testing::run_press("full", {}, prompt, 0);
  // y_1 comes from the prompt's own logits, exactly.
  EXPECT_EQ(run.logits.front(), full.logits.front());
  EXPECT_EQ(run.generated.front(), full.generated.front());
  ASSERT_TRUE(run.session->last_eviction().has_value());
  EXPECT_EQ(run.session->last_eviction()->decode_step, 0);
  EXPECT_GT(run.session->timings().lookahead_seconds, 0.0);
  std::vector<int32_t> tokens = prompt;
  tokens.insert(tokens.end(), run.generated.begin(), run.generated.end() - 1);
  const auto& kept = run.positions;
  const auto reference = testing::reference_logits(
      testing::press_test_model_path(), tokens, [&](int64_t l, int64_t g, int64_t key, int64_t query) {
        if (query < kTokens || key >= kTokens) return true;
        return std::binary_search(kept[l][g].begin(), kept[l][g].end(), static_cast<int32_t>(key));
      });
  for (size_t s = 0; s < run.logits.size(); ++s) {
    EXPECT_LT(testing::relative_l2(run.logits[s].data(), reference[kTokens - 1 + s]), 1e-4) << "step " << s;
  }
}

// Without weights=, the press reads <model>.lookahead.gguf beside the model's file (how the
// in-house model's trained weights in models/ are found).
TEST(LookaheadKv, WithoutWeightsItReadsTheFileBesideTheModel) {
  gguf_test::TempDir dir;
  const std::string model = dir.file("m.gguf");
  std::filesystem::copy_file(testing::press_test_model_path(), model);
  const std::string beside = dir.file("m.lookahead.gguf");
  std::filesystem::copy_file(testing::press_test_lookahead_weights_path(), beside);
  const std::string other = dir.file("other.gguf");
  save_lookahead_weights(other, testing::random_lookahead_weights(testing::model_shape(model), 6, 4, 0.3f, 99));
  const auto prompt = testing::random_prompt(kPrompt, 21);
  const KvBudget budget = KvBudget::per_head(24);
  const auto found = testing::run_press_on_model(model, "lookaheadkv:window=8", budget, prompt, 2);
  const auto named = testing::run_press_on_model(model, "lookaheadkv:window=8,weights=" + beside, budget, prompt, 2);
  const auto others = testing::run_press_on_model(model, "lookaheadkv:window=8,weights=" + other, budget, prompt, 2);
  EXPECT_EQ(found.positions, named.positions);
  EXPECT_EQ(found.generated, named.generated);
  EXPECT_GT(testing::differing_heads(found, others), 0);  // other weights keep other entries
  std::filesystem::remove(beside);
  try {
    testing::run_press_on_model(model, "lookaheadkv:window=8", budget, prompt, 2);
    ADD_FAILURE() << "no error without weights";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no '" + beside + "' beside the model"), std::string::npos) << e.what();
  }
}

TEST(LookaheadKv, ABudgetCoveringThePromptRunsNoRows) {
  const auto prompt = testing::random_prompt(kPrompt, 5);
  const std::string spec = "lookaheadkv:window=8,weights=" + testing::press_test_lookahead_weights_path();
  const auto run = testing::run_press(spec, KvBudget::per_head(kPrompt), prompt, 2);
  EXPECT_EQ(run.session->timings().lookahead_seconds, 0.0);
  EXPECT_FALSE(run.session->last_eviction().has_value());
}

TEST(LookaheadKv, RowsThatDoNotFitTheContextAreAClearError) {
  auto model = Model::load(testing::press_test_model_path());
  SessionOptions options;
  options.n_ctx = kPrompt + 3;  // the weights have 6 rows
  Session session(model, std::make_shared<ThreadPool>(1), options);
  session.set_press(make_press("lookaheadkv:weights=" + testing::press_test_lookahead_weights_path(),
                               KvBudget::per_head(32)));
  try {
    session.prefill(testing::random_prompt(kPrompt, 5));
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("the prompt's 90 tokens and the 6 positions press"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(session.n_past(), 0);
  EXPECT_EQ(kv_cache_of(session).bytes_held(), 0);
}

// A prefill refused for want of room for the rows runs no hook: a press composed with
// lookaheadkv goes on as if it had not been tried (moment_kv used to take the refused
// prompt's end for its own and stop tracking the generated tokens).
TEST(LookaheadKv, ARefusedPrefillLeavesEveryPressAsItWas) {
  auto model = Model::load(testing::press_test_model_path());
  SessionOptions options;
  options.n_ctx = 100;  // the weights have 6 rows
  Session session(model, std::make_shared<ThreadPool>(1), options);
  session.set_press(make_press("moment_kv:decode_budget=2+lookaheadkv:window=8,weights=" +
                                   testing::press_test_lookahead_weights_path(),
                               KvBudget::per_head(32)));
  session.prefill(testing::random_prompt(60, 5));
  EXPECT_THROW(session.prefill(testing::random_prompt(36, 6)), Error);  // 60 + 36 + 6 > 100
  EXPECT_EQ(session.n_past(), 60);
  for (int32_t token = 1; token <= 8; ++token) session.decode(token);
  const KvCache& kv = kv_cache_of(session);
  for (int64_t l = 0; l < kv.n_layer(); ++l) {
    for (int64_t g = 0; g < kv.n_head_kv(); ++g) {
      const int32_t* positions = kv.positions(l, g);
      const int64_t prompt = std::lower_bound(positions, positions + kv.length(l, g), 60) - positions;
      const int64_t generated = kv.length(l, g) - prompt;
      EXPECT_EQ(generated, 2) << "layer " << l << " head " << g;
    }
  }
}

}  // namespace
}  // namespace deferkv
