// Expected Attention [docs/methods/expected_attention.md] (kvpress): each key is scored by the attention
// it would receive in expectation from future queries. Future queries are modelled as
// Gaussian with the prompt's (pre-RoPE) query mean mu and covariance Sigma, rotated by
// the average RoPE rotation R over the next n_future positions:
//   z_h(j) = (R mu_h) . k_j / sqrt(d) + k_j^T (R Sigma_h R^T) k_j / (2d),
// softmax over the non-sink keys, mean over the GQA group, times ||v_j||; the first
// n_sink tokens are always kept (the selection's sinks). Each KV head keeps its best b at
// the end of prefill. [OUR FORMULATION] per step (every=n) the whole cache is scored again
// with the prompt's statistics, the future positions starting after the newest entry.
// With stats=PATH (kvpress's ExpectedAttentionStatsPress) mu and Sigma are a calibration
// set's, read from a file made for the model (query_stats_file.h), and the prompt's
// queries are not read; [OUR FORMULATION] its head dimensions are permuted for a GGUF llama
// (press/core/trained_tensors.h).
#include <algorithm>
#include <cmath>
#include <optional>

#include "base/thread_pool.h"
#include "kernels/vec.h"
#include "kv/kv_cache.h"
#include "observe/attention_tap.h"
#include "press/core/scored_press.h"
#include "press/methods/expected_attention/query_moments.h"
#include "press/methods/expected_attention/query_stats_file.h"

namespace deferkv {
namespace {

class ExpectedAttentionPress final : public ScoredPress {
 public:
  ExpectedAttentionPress(const PressParams& params, const KvBudget& budget, ScoredParts parts, int64_t n_future,
                         int64_t n_sink, bool covariance, bool value_norm, double epsilon,
                         std::optional<QueryStatsFile> stats)
      : ScoredPress(params, budget, std::move(parts)), n_future_(n_future), n_sink_(n_sink), covariance_(covariance),
        value_norm_(value_norm), epsilon_(epsilon), stats_(std::move(stats)) {}

  // Statistics made for another model are refused before anything runs.
  void on_attach(const PressModelShape& shape, PressHost& host) override {
    ScoredPress::on_attach(shape, host);
    if (stats_) stats_->check_fits(shape);
  }

  void act(const PressAt& at, KvCache& cache) override {
    ScoredPress::act(at, cache);
    if (at.point == PressPoint::kPromptBegin) {
      moments_.clear();
      prompt_end_ = at.first_position + at.n_tokens;
    }
  }

  void on_attention(const AttentionEvent& event) override {
    rotary_ = &event.rotary;
    if (stats_ || event.positions[0] >= prompt_end_) return;  // decode queries are not part of the statistics
    const int64_t heads = event.shape.n_head, d = event.shape.head_dim;
    if (moments_.size() <= static_cast<size_t>(event.layer)) moments_.resize(static_cast<size_t>(event.layer) + 1);
    QueryMoments& m = moments_[static_cast<size_t>(event.layer)];
    // Undo RoPE on the rows past the sinks.
    std::vector<float> rows;
    for (int64_t i = 0; i < event.n; ++i) {
      if (event.positions[i] < n_sink_) continue;
      const float* q = event.queries + i * heads * d;
      rows.insert(rows.end(), q, q + heads * d);
      event.rotary.rotate(rows.data() + rows.size() - heads * d, heads, d, -event.positions[i]);
    }
    m.add(rows.data(), static_cast<int64_t>(rows.size()) / (heads * d), heads, d, covariance_, event.pool);
  }

 protected:
  // The sinks' scores are left at 0: the selection keeps them.
  std::vector<std::vector<float>> score(const LayerEviction& layer) override {
    const KvCache& cache = layer.cache;
    const int64_t d = cache.head_dim(), kv_heads = layer.n_head_kv();
    const QueryMoments* m = stats_ ? nullptr : &moments_.at(static_cast<size_t>(layer.layer));
    const int64_t heads = stats_ ? stats_->n_head() : m->n_head(), group = heads / kv_heads;
    if (layer.layer == 0) mean_rotation_ = average_rotation(d, layer.next_position);
    std::vector<std::vector<float>> scores(static_cast<size_t>(kv_heads));
    for (int64_t g = 0; g < kv_heads; ++g) {
      const int64_t c = layer.candidates[g];
      const int64_t sinks = std::min(n_sink_, c);
      std::vector<double> expected(static_cast<size_t>(c), 0.0);
      for (int64_t h = g * group; h < (g + 1) * group; ++h) {
        std::vector<double> mu, sigma;
        if (stats_) {
          mu = stats_->mean(layer.layer, h, rotary_->interleaved);
          if (covariance_) sigma = stats_->covariance(layer.layer, h, rotary_->interleaved);
        } else {
          mu = m->mean(h);
          if (covariance_) sigma = m->covariance(h);
        }
        add_expected_attention(mu, sigma, d, cache.keys(layer.layer, g), sinks, c, expected);
      }
      std::vector<float>& score = scores[static_cast<size_t>(g)];
      score.assign(static_cast<size_t>(c), 0.0f);
      KvRowReader value(cache.values(layer.layer, g));  // the stored values, as float32
      for (int64_t j = sinks; j < c; ++j) {
        double norm = 1.0;
        if (value_norm_) {
          const float* v = value(j);
          norm = std::sqrt(static_cast<double>(dot_f32(v, v, d)));
        }
        score[j] = static_cast<float>((expected[j] / static_cast<double>(group) + epsilon_) * norm);
      }
    }
    return scores;
  }

 private:
  // R = mean over p in [next, next + n_future) of RoPE(p), as a d x d matrix (row-major).
  std::vector<double> average_rotation(int64_t d, int64_t next) const {
    std::vector<double> r(static_cast<size_t>(d * d), 0.0);
    std::vector<float> basis(static_cast<size_t>(d * d));
    for (int64_t p = next; p < next + n_future_; ++p) {
      std::fill(basis.begin(), basis.end(), 0.0f);
      for (int64_t k = 0; k < d; ++k) basis[k * d + k] = 1.0f;  // "head" k is e_k
      rotary_->rotate(basis.data(), d, d, static_cast<int32_t>(p));
      for (int64_t k = 0; k < d; ++k) {
        for (int64_t i = 0; i < d; ++i) r[i * d + k] += basis[k * d + i] / static_cast<double>(n_future_);
      }
    }
    return r;
  }

  // expected[j] += softmax_j(z_h(j)) over the keys [sinks, c) for a query head of mean mu
  // and covariance sigma (pre-RoPE). Scores the stored keys (dequantised to float32 row by row).
  void add_expected_attention(const std::vector<double>& mu, const std::vector<double>& sigma, int64_t d,
                              const KvRows& keys, int64_t sinks, int64_t c, std::vector<double>& expected) const {
    std::vector<double> mean(static_cast<size_t>(d), 0.0);
    const std::vector<double>& r = mean_rotation_;
    for (int64_t i = 0; i < d; ++i) {
      for (int64_t a = 0; a < d; ++a) mean[i] += r[i * d + a] * mu[a];
    }
    std::vector<float> cov_rotated;  // R Sigma R^T
    if (covariance_) {
      std::vector<double> tmp(static_cast<size_t>(d * d), 0.0);
      for (int64_t i = 0; i < d; ++i) {
        for (int64_t a = 0; a < d; ++a) {
          for (int64_t b = 0; b < d; ++b) tmp[i * d + b] += r[i * d + a] * sigma[a * d + b];
        }
      }
      cov_rotated.assign(static_cast<size_t>(d * d), 0.0f);
      for (int64_t i = 0; i < d; ++i) {
        for (int64_t k = 0; k < d; ++k) {
          double s = 0;
          for (int64_t b = 0; b < d; ++b) s += tmp[i * d + b] * r[k * d + b];
          cov_rotated[i * d + k] = static_cast<float>(s);
        }
      }
    }
    std::vector<float> mean_f(mean.begin(), mean.end()), projected(static_cast<size_t>(d));
    std::vector<double> z(static_cast<size_t>(c), 0.0);
    const double inv_sqrt_d = 1.0 / std::sqrt(static_cast<double>(d));
    double max = -1e300;
    KvRowReader key(keys);
    for (int64_t j = sinks; j < c; ++j) {
      const float* k = key(j);
      z[j] = dot_f32(mean_f.data(), k, d) * inv_sqrt_d;
      if (covariance_) {
        for (int64_t i = 0; i < d; ++i) projected[i] = dot_f32(cov_rotated.data() + i * d, k, d);
        z[j] += dot_f32(projected.data(), k, d) / (2.0 * static_cast<double>(d));
      }
      max = std::max(max, z[j]);
    }
    double total = 0;
    for (int64_t j = sinks; j < c; ++j) total += (z[j] = std::exp(z[j] - max));
    for (int64_t j = sinks; j < c; ++j) expected[j] += z[j] / total;
  }

  int64_t n_future_, n_sink_;
  bool covariance_, value_norm_;
  double epsilon_;
  int64_t prompt_end_ = 0;
  const Rotary* rotary_ = nullptr;
  std::optional<QueryStatsFile> stats_;  // stats=PATH: mu and Sigma from the file, not the prompt
  std::vector<QueryMoments> moments_;   // [layer]
  std::vector<double> mean_rotation_;  // R, for the current eviction
};

}  // namespace

PressMethod expected_attention_method() {
  return {{"expected_attention",
           "attention expected from future queries (Gaussian prompt-query statistics, averaged RoPE) times value norm",
           "Expected Attention (kvpress), arXiv 2510.00636",
           with_shared_parameters({{"n_future", "512", "future positions the RoPE rotation is averaged over"},
                                   {"n_sink", "4", "first tokens always kept (and left out of the statistics)"},
                                   {"use_covariance", "true", "include the query covariance term"},
                                   {"use_vnorm", "true", "multiply by the value's L2 norm"},
                                   {"epsilon", "0", "added to the expected attention before the value norm"},
                                   {"stats", "", "query statistics file made for the model (safetensors: query_mean, query_cov); empty: the prompt's"},
                                   {"dim_order", "hf", "the stats file's head dimensions: hf (permuted for a GGUF llama) | model"}})},
          [](const PressParams& p, const KvBudget& b) -> std::unique_ptr<Press> {
            ScoredParts parts = read_scored_parts(p);
            const int64_t n_sink = p.get_int("n_sink", 0, 1 << 20);
            const HeadDimOrder order = parse_head_dim_order(p.get_choice("dim_order", {"hf", "model"}));
            std::optional<QueryStatsFile> stats;
            if (!p.get_string("stats").empty()) stats = QueryStatsFile::load(p.get_string("stats"), order);
            parts.selection.sinks = n_sink;
            return std::make_unique<ExpectedAttentionPress>(p, b, std::move(parts), p.get_int("n_future", 1, 1 << 20),
                                                            n_sink, p.get_bool("use_covariance"), p.get_bool("use_vnorm"),
                                                            p.get_double("epsilon", 0.0, 1e9), std::move(stats));
          },
          scored_press_role};
}

}  // namespace deferkv
