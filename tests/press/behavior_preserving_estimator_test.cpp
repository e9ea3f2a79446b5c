// The behavior-preserving estimator on random models against independent references:
// the double-precision forward (tests/model/reference_forward.h) with one entry hidden
// from the reference query, and finite differences of the model's own output head.
//
// What is exact and what is not: deleting entry j of layer l changes the reference
// query's attention output at l exactly as §10.2 step 1 says; the estimator then
// assumes the change reaches the final residual unchanged (pass-through), linearises
// the final RMSNorm, and (K < V) truncates the vocabulary. In a one-layer model whose
// feed-forward block adds nothing, the pass-through is exact, so with K = V the estimate
// must equal KL(p || softmax(z + W_U J dr)) with dr the true residual change, up to
// float rounding; against the true KL only the norm's linearisation separates them.
// With several layers and feed-forward blocks the estimate is an approximation: there
// we assert that it ranks the entries like the true KL does, not that it equals it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "base/thread_pool.h"
#include "deferkv/error.h"
#include "deferkv/model_readout.h"
#include "deferkv/session.h"
#include "engine/session_internals.h"
#include "kernels/quant.h"
#include "kv/kv_cache.h"
#include "model/model_weights.h"
#include "model/reference_forward.h"
#include "observe/attention_tap.h"
#include "press/methods/behavior_preserving/kl_greedy_selection.h"
#include "press/methods/behavior_preserving/reference_capture.h"
#include "press/press_test_util.h"

namespace deferkv {
namespace {

// Captures what the estimator reads, without evicting anything.
class RecordingPress final : public Press {
 public:
  std::string describe() const override { return "recording"; }
  PressPoints points() const override { return {}; }  // it only observes
  void act(const PressAt&, KvCache&) override {}
  void on_attach(const PressModelShape&, PressHost& host) override {
    readout = &host.read_model_output([this](const ResidualEvent& e) { capture.add_residuals(e); });
  }
  void on_attention(const AttentionEvent& e) override {
    capture.add_queries(e);
    shape = e.shape;
  }

  ReferenceCapture capture{1};
  const ModelReadout* readout = nullptr;
  AttentionShape shape{};
};

// A session that has read `prompt`, with its recorder.
struct Recorded {
  std::shared_ptr<const Model> model;
  std::unique_ptr<Session> session;
  RecordingPress* recorder;
  ThreadPool pool{2};

  Recorded(const std::string& path, const std::vector<int32_t>& prompt) : model(Model::load(path)) {
    SessionOptions options;
    options.n_ctx = 256;
    options.n_batch = 32;
    options.cache_type_k = options.cache_type_v = "f32";  // compared at float32 precision
    session = std::make_unique<Session>(model, std::make_shared<ThreadPool>(2), options);
    auto press = std::make_unique<RecordingPress>();
    recorder = press.get();
    session->set_press(std::move(press));
    session->prefill(prompt);
  }

  const ReferencePosition& reference() const { return *recorder->capture.complete(model->config().n_layer).at(0); }
  OutputSensitivity output(int64_t top_k) const {
    return output_sensitivity(*recorder->readout, reference().residual.data(), top_k);
  }
  // Builds `out` for `layer` with every entry of [first, end) of every KV head a candidate.
  void build(LayerDeletionModel& out, int64_t layer, const OutputSensitivity& output, int64_t first, int64_t end) {
    const KvCache& cache = kv_cache_of(*session);
    const ModelConfig& c = model->config();
    std::vector<float> w_o(static_cast<size_t>(c.n_embd * c.q_dim()));
    recorder->readout->attention_output(layer, w_o.data());
    std::vector<KvHeadView> kv;
    std::vector<std::vector<int32_t>> candidates;
    for (int64_t g = 0; g < c.n_head_kv; ++g) {
      kv.push_back({cache.keys(layer, g), cache.values(layer, g), cache.positions(layer, g), cache.length(layer, g)});
      std::vector<int32_t> entries(static_cast<size_t>(end - first));
      std::iota(entries.begin(), entries.end(), static_cast<int32_t>(first));
      candidates.push_back(entries);
    }
    const ReferencePosition& ref = reference();
    out.build({{ref.position, ref.queries[layer].data(), &output}}, w_o, c.n_embd, recorder->shape, kv, candidates, pool);
  }
};

double kl_of_logits(const std::vector<double>& full, const std::vector<double>& other) {
  const double max_a = *std::max_element(full.begin(), full.end()), max_b = *std::max_element(other.begin(), other.end());
  double za = 0, zb = 0;
  for (size_t v = 0; v < full.size(); ++v) {
    za += std::exp(full[v] - max_a);
    zb += std::exp(other[v] - max_b);
  }
  double kl = 0;
  for (size_t v = 0; v < full.size(); ++v) {
    const double log_p = full[v] - max_a - std::log(za), log_q = other[v] - max_b - std::log(zb);
    kl += std::exp(log_p) * (log_p - log_q);
  }
  return kl;
}

// Spearman's rank correlation (no ties expected among continuous values).
double rank_correlation(const std::vector<double>& a, const std::vector<double>& b) {
  auto ranks = [](const std::vector<double>& x) {
    std::vector<size_t> order(x.size());
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](size_t i, size_t j) { return x[i] < x[j]; });
    std::vector<double> r(x.size());
    for (size_t i = 0; i < order.size(); ++i) r[order[i]] = static_cast<double>(i);
    return r;
  };
  const auto ra = ranks(a), rb = ranks(b);
  const double n = static_cast<double>(a.size());
  double d2 = 0;
  for (size_t i = 0; i < ra.size(); ++i) d2 += (ra[i] - rb[i]) * (ra[i] - rb[i]);
  return 1.0 - 6.0 * d2 / (n * (n * n - 1.0));
}

// Hides entry `key` of (layer, KV head) from the query at `query` only.
testing::KeyVisibility hide(int64_t layer, int64_t kv_head, int64_t key, int64_t query) {
  return [=](int64_t l, int64_t g, int64_t k, int64_t q) { return !(l == layer && g == kv_head && k == key && q == query); };
}

std::string attention_only_model() {
  RandomModelSpec spec;
  spec.n_embd = 64;
  spec.n_layer = 1;
  spec.n_head = 4;
  spec.n_head_kv = 2;
  spec.n_ff = 64;
  spec.attention_only = true;
  spec.seed = 5;
  return testing::random_model_path(spec);
}

TEST(BehaviorPreservingEstimator, OneAttentionOnlyLayerMatchesTheLinearisedTrueResidualChange) {
  const std::string path = attention_only_model();
  const auto prompt = testing::random_prompt(40, 7);
  const int64_t t = 39;
  Recorded rec(path, prompt);
  const int64_t vocab = rec.model->config().n_vocab;
  const OutputSensitivity output = rec.output(vocab);  // K = V: no truncation
  LayerDeletionModel model;
  rec.build(model, 0, output, 0, 40);

  const auto x = testing::reference_final_residuals(path, prompt, {})[t];
  const auto z = testing::reference_logits_of_residual(path, x);
  std::vector<double> estimated, linearised, truth;
  for (int64_t g = 0; g < 2; ++g) {
    for (int64_t j = 0; j < 40; ++j) {
      DeletionSet set(model);
      set.add({{g, j}});
      estimated.push_back(set.kl());
      // The true residual change (exactly W_O do here), carried through W_U J by a
      // central difference of the double-precision output head.
      const auto x_masked = testing::reference_final_residuals(path, prompt, hide(0, g, j, t))[t];
      constexpr double kStep = 1e-3;
      std::vector<double> plus = x, minus = x;
      for (size_t i = 0; i < x.size(); ++i) {
        plus[i] += kStep * (x_masked[i] - x[i]);
        minus[i] -= kStep * (x_masked[i] - x[i]);
      }
      const auto z_plus = testing::reference_logits_of_residual(path, plus);
      const auto z_minus = testing::reference_logits_of_residual(path, minus);
      std::vector<double> z_linear = z;
      for (size_t v = 0; v < z.size(); ++v) z_linear[v] += (z_plus[v] - z_minus[v]) / (2 * kStep);
      linearised.push_back(kl_of_logits(z, z_linear));
      truth.push_back(kl_of_logits(z, testing::reference_logits_of_residual(path, x_masked)));
    }
  }
  double worst_linearised = 0, total_truth = 0, total_gap = 0;
  for (size_t i = 0; i < estimated.size(); ++i) {
    worst_linearised = std::max(worst_linearised, std::abs(estimated[i] - linearised[i]) / (linearised[i] + 1e-9));
    total_truth += truth[i];
    total_gap += std::abs(estimated[i] - truth[i]);
  }
  // Measured: 9e-7, 0.7 % and 0.9999.
  EXPECT_LT(worst_linearised, 1e-4);  // steps 1-4 without approximation beyond float rounding
  EXPECT_LT(total_gap / total_truth, 0.05) << "linearising the final norm";
  EXPECT_GT(rank_correlation(estimated, truth), 0.99);
}

TEST(BehaviorPreservingEstimator, RanksEntriesLikeTheTrueKlInADeeperModel) {
  const std::string path = testing::press_test_model_path();  // 3 layers with feed-forward blocks
  const auto prompt = testing::random_prompt(48, 9);
  const int64_t t = 47;
  Recorded rec(path, prompt);
  const OutputSensitivity output = rec.output(256);
  const auto z = testing::reference_logits_of_residual(path, testing::reference_final_residuals(path, prompt, {})[t]);
  for (int64_t layer = 0; layer < 3; ++layer) {
    SCOPED_TRACE(layer);
    LayerDeletionModel model;
    rec.build(model, layer, output, 4, 40);
    std::vector<double> estimated, truth;
    for (int64_t g = 0; g < 2; ++g) {
      for (int64_t c = 0; c < 36; ++c) {
        DeletionSet set(model);
        set.add({{g, c}});
        estimated.push_back(set.kl());
        const auto masked = testing::reference_logits(path, prompt, hide(layer, g, 4 + c, t))[t];
        truth.push_back(kl_of_logits(z, masked));
      }
    }
    EXPECT_GT(rank_correlation(estimated, truth), 0.9);  // measured 0.976, 0.976, 0.995
  }
}

TEST(BehaviorPreservingEstimator, LogitJacobianMatchesFiniteDifferencesOfTheOutputHead) {
  RandomModelSpec tied;
  tied.n_embd = 64;
  tied.n_layer = 1;
  tied.n_head = 4;
  tied.n_head_kv = 2;
  tied.n_ff = 64;
  tied.weight_type = DType::Q8_0;
  tied.tied_output = true;
  for (const std::string& path : {testing::press_test_model_path(), testing::random_model_path(tied)}) {
    SCOPED_TRACE(path);
    const auto prompt = testing::random_prompt(20, 4);
    Recorded rec(path, prompt);
    const OutputSensitivity output = rec.output(32);
    const std::vector<float>& x = rec.reference().residual;
    std::vector<double> direction(x.size()), plus(x.size()), minus(x.size());
    for (size_t i = 0; i < x.size(); ++i) direction[i] = std::sin(1.0 + 3.0 * static_cast<double>(i));
    constexpr double kStep = 1e-4;
    for (size_t i = 0; i < x.size(); ++i) {
      plus[i] = x[i] + kStep * direction[i];
      minus[i] = x[i] - kStep * direction[i];
    }
    const auto z_plus = testing::reference_logits_of_residual(path, plus);
    const auto z_minus = testing::reference_logits_of_residual(path, minus);
    for (int64_t k = 0; k < output.distribution.size(); ++k) {
      double predicted = 0;
      for (size_t i = 0; i < x.size(); ++i) predicted += output.logit_jacobian[k * x.size() + i] * direction[i];
      const int32_t token = output.distribution.tokens[k];
      EXPECT_NEAR(predicted, (z_plus[token] - z_minus[token]) / (2 * kStep), 1e-4 * (1 + std::abs(predicted))) << k;
    }
  }
}

TEST(BehaviorPreservingEstimator, ReadoutGivesTheSessionsLogitsAndTheTiedEmbeddingRows) {
  RandomModelSpec tied;
  tied.n_embd = 64;
  tied.n_layer = 2;
  tied.n_ff = 64;
  tied.weight_type = DType::Q8_0;
  tied.tied_output = true;
  const auto prompt = testing::random_prompt(30, 2);
  Recorded rec(testing::random_model_path(tied), prompt);
  const ModelReadout& readout = *rec.recorder->readout;
  std::vector<float> logits(static_cast<size_t>(readout.n_vocab()));
  readout.logits(rec.reference().residual.data(), logits.data());
  EXPECT_EQ(logits, std::vector<float>(rec.session->last_logits(), rec.session->last_logits() + logits.size()));
  const WeightMatrix& embd = rec.model->weights().token_embd;
  const int32_t tokens[] = {5, 300};
  std::vector<float> rows(2 * 64), expected(64);
  readout.lm_head_rows(tokens, 2, rows.data());
  for (int i = 0; i < 2; ++i) {
    dequantize_row(embd.type, embd.row(tokens[i]), expected.data(), 64);
    EXPECT_TRUE(std::equal(expected.begin(), expected.end(), rows.begin() + i * 64));
  }
  const int32_t bad = static_cast<int32_t>(readout.n_vocab());
  EXPECT_THROW(readout.lm_head_rows(&bad, 1, rows.data()), Error);
  EXPECT_THROW(readout.attention_output(2, rows.data()), Error);
}

TEST(BehaviorPreservingGreedy, MarginalsAreExactAndTheGreedyTakesTheCheapest) {
  const auto prompt = testing::random_prompt(48, 9);
  Recorded rec(testing::press_test_model_path(), prompt);
  const OutputSensitivity output = rec.output(256);
  LayerDeletionModel model;
  rec.build(model, 1, output, 4, 40);
  // kl_with predicts the set's KL after add, for sets of growing size.
  DeletionSet set(model);
  std::vector<float> scratch;
  for (const auto& [g, c] : std::vector<std::pair<int64_t, int64_t>>{{0, 3}, {1, 3}, {0, 20}, {0, 7}, {1, 30}}) {
    const double predicted = set.kl_with(g, c, scratch);
    set.add({{g, c}});
    EXPECT_NEAR(predicted, set.kl(), 1e-6 * set.kl() + 1e-12);
  }
  // One deletion from head 0, the pool holding everything: the cheapest singleton by the
  // exact KL.
  const KlGreedyOptions options{1000.0, 1, 32, false};
  const auto one = choose_deletions(model, {1, 0}, options, rec.pool);
  double best = 1e300;
  int32_t cheapest = -1;
  for (int32_t c = 0; c < 36; ++c) {
    DeletionSet single(model);
    single.add({{0, c}});
    if (single.kl() < best) best = single.kl(), cheapest = c;
  }
  EXPECT_EQ(one[0], std::vector<int32_t>{cheapest});
  EXPECT_TRUE(one[1].empty());
  // Quotas: exactly per head, or (flexible) in all; blocks larger than one change the
  // path, not the counts.
  const auto fixed = choose_deletions(model, {10, 4}, {2.0, 3, 1, false}, rec.pool);
  EXPECT_EQ(fixed[0].size(), 10u);
  EXPECT_EQ(fixed[1].size(), 4u);
  const auto flexible = choose_deletions(model, {10, 4}, {2.0, 3, 1, true}, rec.pool);
  EXPECT_EQ(flexible[0].size() + flexible[1].size(), 14u);
  const auto capped = choose_deletions(model, {100, -5}, {2.0, 64, 32, false}, rec.pool);
  EXPECT_EQ(capped[0].size(), 36u);  // no more than its candidates
  EXPECT_TRUE(capped[1].empty());
}

}  // namespace
}  // namespace deferkv
