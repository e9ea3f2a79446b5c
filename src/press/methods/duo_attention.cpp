// DuoAttention [docs/methods/duo_attention.md] (Xiao et al., arXiv 2410.10819; kvpress
// DuoAttentionPress): a few KV heads retrieve from the whole context (retrieval heads, which
// keep every entry), the others attend to the first tokens and the recent ones (streaming
// heads, which keep sink_size + recent_size). Which heads stream is decided over the whole
// model: the share head_compression_ratio of all (layer, KV head) pairs with the lowest
// scores. The scores are kvpress's on-the-fly ones (duo_attention_on_the_fly) or a
// pattern trained for the model (pattern=DIR, DuoAttention's published format).
//
// On the fly, per layer: the mean pre-RoPE query of each query head and the mean pre-RoPE
// key of each KV head, each repeated at positions 0 .. q_len-1 and rotated there; the last
// query's softmax over those q_len keys (scaled by 1/sqrt(d)); the head's score is the mean
// of that attention's cumulative sum (the area under the cumulative attention curve: large
// when the attention sits on the first keys, far away), averaged over the KV head's query
// heads. [OUR FORMULATION] the means are over the prompt itself (its queries, its entries'
// keys rotated back from the cache), not over 50 BookSum samples computed once per model.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <numeric>
#include <optional>
#include <sstream>

#include <nlohmann/json.hpp>

#include "deferkv/error.h"
#include "kernels/kv_rows.h"
#include "kernels/rope.h"
#include "kv/kv_cache.h"
#include "observe/attention_tap.h"
#include "press/core/prompt_press.h"
#include "press/registry.h"
#include "tensor/json_numbers.h"

namespace deferkv {
namespace {

// A trained pattern: per layer and KV head, the gate of its full attention, in [0, 1].
struct DuoPattern {
  int64_t sink_size = 0, recent_size = 0;
  std::vector<std::vector<double>> head_scores;  // [layer][g]
};

// DuoAttention's attn_patterns/<model>/<run>/ folder: config.json ("sink_size",
// "recent_size") and full_attention_heads.tsv (one line per layer, one tab-separated
// value per KV head), the values clipped to [0, 1] as DuoAttention's loader does.
DuoPattern load_pattern(const std::string& dir) {
  DuoPattern p;
  const std::string config_path = dir + "/config.json";
  std::ifstream config(config_path);
  if (!config) fail("duo_attention: cannot read the pattern's config '{}'", config_path);
  const nlohmann::json j = nlohmann::json::parse(config, nullptr, false);
  for (const auto& [field, into] : {std::pair{"sink_size", &p.sink_size}, std::pair{"recent_size", &p.recent_size}}) {
    const std::optional<int64_t> v =
        j.is_object() && j.contains(field) ? json_whole_number(j.at(field)) : std::nullopt;
    if (!v || *v < 0) fail("duo_attention: '{}' needs {} as a whole number of entries", config_path, field);
    *into = *v;
  }
  const std::string tsv_path = dir + "/full_attention_heads.tsv";
  std::ifstream tsv(tsv_path);
  if (!tsv) fail("duo_attention: cannot read the pattern's head scores '{}'", tsv_path);
  std::string line;
  while (std::getline(tsv, line)) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    std::vector<double>& layer = p.head_scores.emplace_back();
    std::stringstream cells(line);
    std::string cell;
    while (std::getline(cells, cell, '\t')) {
      char* end = nullptr;
      const double v = std::strtod(cell.c_str(), &end);
      if (cell.empty() || end == cell.c_str() || !std::isfinite(v)) {
        fail("duo_attention: '{}' line {}: '{}' is not a number", tsv_path, p.head_scores.size(), cell);
      }
      layer.push_back(std::clamp(v, 0.0, 1.0));
    }
  }
  return p;
}

// kvpress's on-the-fly score of query head q against KV head k (both mean pre-RoPE vectors of d).
double cumulative_attention_area(std::vector<float> q, const std::vector<float>& k, const Rotary& rotary,
                                 int64_t q_len) {
  const auto d = static_cast<int64_t>(q.size());
  rotary.rotate(q.data(), 1, d, static_cast<int32_t>(q_len - 1));
  std::vector<double> logits(static_cast<size_t>(q_len));
  std::vector<float> kj(k.size());
  for (int64_t j = 0; j < q_len; ++j) {
    std::copy(k.begin(), k.end(), kj.begin());
    rotary.rotate(kj.data(), 1, d, static_cast<int32_t>(j));
    double dot = 0;
    for (int64_t i = 0; i < d; ++i) dot += static_cast<double>(q[i]) * kj[i];
    logits[j] = dot / std::sqrt(static_cast<double>(d));
  }
  const double max = *std::max_element(logits.begin(), logits.end());
  double total = 0;
  for (double& z : logits) total += (z = std::exp(z - max));
  double cumulative = 0, area = 0;
  for (double z : logits) area += (cumulative += z / total);
  return area / static_cast<double>(q_len);
}

struct DuoParams {
  double head_compression_ratio;
  int64_t sink_size, recent_size, q_len;
  std::optional<DuoPattern> pattern;
};

class DuoAttentionPress final : public PromptPress {
 public:
  DuoAttentionPress(const PressParams& params, const KvBudget& budget, DuoParams p)
      : PromptPress(params, budget), p_(std::move(p)) {
    if (p_.pattern) p_.sink_size = p_.pattern->sink_size, p_.recent_size = p_.pattern->recent_size;
  }

  void on_attach(const PressModelShape& shape, PressHost& host) override {
    PromptPress::on_attach(shape, host);
    shape_ = shape;
    if (!p_.pattern) return;
    const auto& s = p_.pattern->head_scores;
    const auto has_every_head = [&](const std::vector<double>& l) {
      return static_cast<int64_t>(l.size()) == shape.n_head_kv;
    };
    const bool fits =
        static_cast<int64_t>(s.size()) == shape.n_layer && std::all_of(s.begin(), s.end(), has_every_head);
    if (!fits) {
      fail("press '{}': the pattern has {} layers of {} KV heads; this model has {} layers of {}", description(),
           s.size(), s.empty() ? 0 : s[0].size(), shape.n_layer, shape.n_head_kv);
    }
  }

  // The streaming heads are the lowest scores of the whole model, so no layer is evicted
  // before every layer's queries are in: the press acts at the prompt's end.
  PressPoints points() const override { return PromptPress::points().with(PressPoint::kPromptEnd); }
  // The retrieval heads keep the whole prompt, the streaming ones sinks + recent: the mean
  // over the model's heads, with the streaming count rounded as apply() rounds it.
  PressHolding holding(const PressModelShape& shape, int64_t prompt_tokens) const override {
    const int64_t heads = shape.n_layer * shape.n_head_kv;
    if (heads <= 0) return {.kept = prompt_tokens};
    const auto streaming = static_cast<int64_t>(std::nearbyint(static_cast<double>(heads) * p_.head_compression_ratio));
    const int64_t stream_keeps = std::min(prompt_tokens, p_.sink_size + p_.recent_size);
    const int64_t total = (heads - streaming) * prompt_tokens + streaming * stream_keeps;
    return {.kept = (total + heads - 1) / heads};
  }

  void act(const PressAt& at, KvCache& cache) override {
    PromptPress::act(at, cache);
    if (at.point == PressPoint::kPromptBegin) {
      first_ = at.first_position;
      query_sums_.assign(static_cast<size_t>(shape_.n_layer), {});
      query_rows_.assign(static_cast<size_t>(shape_.n_layer), 0);
    } else if (at.point == PressPoint::kPromptEnd) {
      evict_streaming_heads(cache);
    }
  }

  // The prompt's queries, rotated back to pre-RoPE and summed per layer and query head.
  void on_attention(const AttentionEvent& event) override {
    if (p_.pattern || event.phase != PassPhase::kPrompt || event.positions[0] >= prompt_end()) return;
    if (rotary_.n_rot == 0) rotary_ = event.rotary;
    const int64_t width = event.shape.n_head * event.shape.head_dim;
    if (query_sums_.size() <= static_cast<size_t>(event.layer)) {
      query_sums_.resize(static_cast<size_t>(event.layer) + 1);
      query_rows_.resize(static_cast<size_t>(event.layer) + 1, 0);
    }
    std::vector<double>& sums = query_sums_[static_cast<size_t>(event.layer)];
    sums.resize(static_cast<size_t>(width), 0.0);
    std::vector<float> row(static_cast<size_t>(width));
    for (int64_t i = 0; i < event.n && event.positions[i] < prompt_end(); ++i) {
      std::copy(event.queries + i * width, event.queries + (i + 1) * width, row.begin());
      rotary_.rotate(row.data(), event.shape.n_head, event.shape.head_dim, -event.positions[i]);
      for (int64_t e = 0; e < width; ++e) sums[e] += row[e];
      ++query_rows_[static_cast<size_t>(event.layer)];
    }
  }

 private:
  void evict_streaming_heads(KvCache& cache) {
    const std::vector<std::vector<double>> scores = p_.pattern ? p_.pattern->head_scores : on_the_fly(cache);
    const int64_t heads = cache.n_layer() * cache.n_head_kv();
    // Python's round (half to even), as kvpress's n_pruned.
    const auto streaming = static_cast<int64_t>(std::nearbyint(static_cast<double>(heads) * p_.head_compression_ratio));
    std::vector<int64_t> order(static_cast<size_t>(heads));
    std::iota(order.begin(), order.end(), 0);
    const auto score = [&](int64_t i) { return scores[i / cache.n_head_kv()][i % cache.n_head_kv()]; };
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return score(a) < score(b); });
    for (int64_t i = 0; i < streaming; ++i) {
      const int64_t l = order[i] / cache.n_head_kv(), g = order[i] % cache.n_head_kv();
      // kvpress masks keys [sink_size, length - recent_size).
      std::vector<int32_t> dropped;
      for (int64_t j = p_.sink_size; j < cache.length(l, g) - p_.recent_size; ++j) {
        dropped.push_back(static_cast<int32_t>(j));
      }
      if (!dropped.empty()) cache.erase(l, g, dropped);
    }
    query_sums_.clear();
  }

  std::vector<std::vector<double>> on_the_fly(const KvCache& cache) const {
    const int64_t d = cache.head_dim(), group = shape_.n_head / shape_.n_head_kv;
    std::vector<std::vector<double>> out(static_cast<size_t>(cache.n_layer()));
    for (int64_t l = 0; l < cache.n_layer(); ++l) {
      // A layer no prompt row reached (an empty prompt) scores 0 in every head.
      static const std::vector<double> none;
      const bool seen = static_cast<size_t>(l) < query_rows_.size();
      const std::vector<double>& sums = seen ? query_sums_[static_cast<size_t>(l)] : none;
      const double rows = seen ? static_cast<double>(query_rows_[static_cast<size_t>(l)]) : 0.0;
      for (int64_t g = 0; g < cache.n_head_kv(); ++g) {
        const std::vector<float> key = mean_key(cache, l, g);
        double score = 0;
        for (int64_t h = g * group; h < (g + 1) * group && rows > 0; ++h) {
          std::vector<float> query(static_cast<size_t>(d));
          for (int64_t e = 0; e < d; ++e) query[e] = static_cast<float>(sums[h * d + e] / rows);
          score += cumulative_attention_area(query, key, rotary_, p_.q_len) / static_cast<double>(group);
        }
        out[l].push_back(score);
      }
    }
    return out;
  }

  // The mean pre-RoPE key of this prompt's entries of (l, g): the cache's keys rotated back.
  std::vector<float> mean_key(const KvCache& cache, int64_t l, int64_t g) const {
    const int64_t d = cache.head_dim();
    KvRowReader keys(cache.keys(l, g));
    const int32_t* positions = cache.positions(l, g);
    std::vector<double> sum(static_cast<size_t>(d), 0.0);
    std::vector<float> row(static_cast<size_t>(d));
    int64_t n = 0;
    for (int64_t j = 0; j < cache.length(l, g); ++j) {
      if (positions[j] < first_ || positions[j] >= prompt_end()) continue;
      const float* k = keys(j);
      std::copy(k, k + d, row.begin());
      rotary_.rotate(row.data(), 1, d, -positions[j]);
      for (int64_t e = 0; e < d; ++e) sum[e] += row[e];
      ++n;
    }
    std::vector<float> mean(static_cast<size_t>(d), 0.0f);
    for (int64_t e = 0; e < d && n > 0; ++e) mean[e] = static_cast<float>(sum[e] / static_cast<double>(n));
    return mean;
  }

  DuoParams p_;
  PressModelShape shape_{};
  Rotary rotary_;
  int64_t first_ = 0;
  std::vector<std::vector<double>> query_sums_;  // [layer][h * d + e]: pre-RoPE queries summed
  std::vector<int64_t> query_rows_;              // [layer]: the rows summed
};

}  // namespace

PressMethod duo_attention_method() {
  return {{"duo_attention",
           "streaming heads (the lowest-scored share, the kv_ratio) keep sinks + recent, retrieval heads all",
           "Xiao et al., DuoAttention, arXiv 2410.10819; kvpress DuoAttentionPress (on_the_fly_scoring)",
           {{"head_compression_ratio", "",
             "share of all (layer, KV head) pairs made streaming heads; default: the run's kv_ratio, as kvpress's "
             "leaderboard passes it"},
            {"sink_size", "128", "first entries a streaming head keeps (kvpress's on-the-fly value)"},
            {"recent_size", "256", "newest entries a streaming head keeps (kvpress's on-the-fly value)"},
            {"q_len", "500", "positions of the repeated mean query and key in the on-the-fly score"},
            {"pattern", "",
             "a DuoAttention pattern folder (config.json, full_attention_heads.tsv) trained for this model, in place "
             "of the on-the-fly scores; its sink_size and recent_size are used"}},
           false},
          [](const PressParams& p, const KvBudget& b) -> std::unique_ptr<Press> {
            DuoParams params{0, p.get_int("sink_size", 0, 1 << 24), p.get_int("recent_size", 0, 1 << 24),
                             p.get_int("q_len", 1, 1 << 20), std::nullopt};
            if (!p.get_string("head_compression_ratio").empty()) {
              params.head_compression_ratio = p.get_double("head_compression_ratio", 0.0, 1.0);
            } else if (b.is_ratio()) {
              params.head_compression_ratio = b.compression_ratio();
            } else {
              fail("press 'duo_attention' needs head_compression_ratio=R (the share of streaming heads) or a "
                   "kv_ratio; a budget of entries per head does not say how many heads stream");
            }
            if (!p.get_string("pattern").empty()) params.pattern = load_pattern(p.get_string("pattern"));
            return std::make_unique<DuoAttentionPress>(p, b, std::move(params));
          }};
}

}  // namespace deferkv
