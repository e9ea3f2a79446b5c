// CUR [docs/methods/cur.md] (kvpress CURPress, after CurDKV, arXiv 2509.15038): entries
// whose keys and values carry much of their neighbourhood's energy are the rows a CUR
// decomposition of K and V would pick, so each entry is scored by approximate leverage,
// its squared key and value norms (optionally after a seeded random projection), each
// normalised within local windows of `local_window_size` entries, combined by
// `leverage_type` (default: their product), and normalised over the head. The first
// `num_sinks` entries are always kept.
#include <cmath>
#include <string>

#include "kv/kv_cache.h"
#include "press/core/scored_press.h"
#include "press/methods/compactor/leverage_scores.h"

namespace deferkv {
namespace {

enum class LeverageType { kKey, kValue, kKvAvg, kKvProduct };

// kvpress projects onto r = 20 columns when use_random_leverage is set.
constexpr int64_t kRandomColumns = 20;

struct CurOptions {
  LeverageType type = LeverageType::kKvProduct;
  bool random_projection = false;
  bool local = true;
  int64_t window = 16;
  int64_t seed = 0;
};

class CurPress final : public ScoredPress {
 public:
  CurPress(const PressParams& params, const KvBudget& budget, ScoredParts parts, CurOptions options)
      : ScoredPress(params, budget, std::move(parts)), o_(options) {}

 protected:
  // The cached keys (after RoPE) and values, as kvpress scores them: RoPE keeps norms.
  std::vector<std::vector<float>> score(const LayerEviction& layer) override {
    const int64_t d = layer.cache.head_dim();
    // One projection for the layer's heads, keys and values alike, as kvpress draws one G.
    // [OUR FORMULATION] seeded like the random method (kvpress: torch's global generator).
    std::vector<double> g_matrix;
    if (o_.random_projection) g_matrix = gaussian_sketch({o_.seed, layer.layer, 0, layer.next_position}, d, kRandomColumns);
    std::vector<std::vector<float>> scores;
    for (int64_t g = 0; g < layer.n_head_kv(); ++g) {
      const int64_t c = layer.candidates[g];
      std::vector<double> k2 = energies(layer.cache.keys(layer.layer, g), c, d, g_matrix);
      std::vector<double> v2 = energies(layer.cache.values(layer.layer, g), c, d, g_matrix);
      if (o_.local) {
        normalise_windows(k2);
        normalise_windows(v2);
      }
      std::vector<double> s(static_cast<size_t>(c));
      double total = 0;
      for (int64_t j = 0; j < c; ++j) {
        switch (o_.type) {
          case LeverageType::kKey: s[j] = k2[j]; break;
          case LeverageType::kValue: s[j] = v2[j]; break;
          case LeverageType::kKvAvg: s[j] = (k2[j] + v2[j]) / 2; break;
          case LeverageType::kKvProduct: s[j] = k2[j] * v2[j]; break;
        }
        total += s[j];
      }
      // The head's sum normalises the scale an allocation across heads (adakv) compares.
      std::vector<float>& out = scores.emplace_back(static_cast<size_t>(c));
      for (int64_t j = 0; j < c; ++j) out[j] = static_cast<float>(s[j] / total);
    }
    return scores;
  }

 private:
  // ||x_j||^2 of the first c rows, or ||x_j G||^2 with the projection G [d x r].
  static std::vector<double> energies(const KvRows& rows, int64_t c, int64_t d, const std::vector<double>& g) {
    KvRowReader reader(rows);
    std::vector<double> out(static_cast<size_t>(c), 0.0);
    for (int64_t j = 0; j < c; ++j) {
      const float* x = reader(j);
      if (g.empty()) {
        for (int64_t i = 0; i < d; ++i) out[j] += double(x[i]) * x[i];
        continue;
      }
      for (int64_t col = 0; col < kRandomColumns; ++col) {
        double y = 0;
        for (int64_t i = 0; i < d; ++i) y += x[i] * g[i * kRandomColumns + col];
        out[j] += y * y;
      }
    }
    return out;
  }

  // Each value over the sum of its window of o_.window entries, windows from the first
  // candidate (the last may be shorter: kvpress pads it with zeros).
  void normalise_windows(std::vector<double>& x) const {
    const size_t w = static_cast<size_t>(o_.window);
    for (size_t start = 0; start < x.size(); start += w) {
      const size_t end = std::min(x.size(), start + w);
      double sum = 0;
      for (size_t j = start; j < end; ++j) sum += x[j];
      for (size_t j = start; j < end; ++j) x[j] /= sum;
    }
  }

  CurOptions o_;
};

LeverageType parse_leverage_type(const std::string& name) {
  if (name == "key") return LeverageType::kKey;
  if (name == "value") return LeverageType::kValue;
  if (name == "kv_avg") return LeverageType::kKvAvg;
  return LeverageType::kKvProduct;
}

}  // namespace

PressMethod cur_method() {
  return {{"cur", "keep the entries of largest approximate key/value leverage (local energy), per KV head, at prefill end",
           "CurDKV, arXiv 2509.15038; kvpress CURPress",
           with_shared_parameters(
               {{"num_sinks", "4", "first tokens always kept"},
                {"leverage_type", "kv_product", "key, value, kv_avg or kv_product: how key and value scores combine"},
                {"use_random_leverage", "false", "project keys and values on 20 seeded Gaussian columns first"},
                {"use_local_approximation", "true", "normalise the energies within local windows"},
                {"local_window_size", "16", "entries per local window"},
                {"seed", "0", "seeds the projection of use_random_leverage"}}, {.pieces = true})},
          [](const PressParams& p, const KvBudget& b) -> std::unique_ptr<Press> {
            ScoredParts parts = read_scored_parts(p);
            parts.selection.sinks = p.get_int("num_sinks", 0, 1 << 20);
            CurOptions o;
            o.type = parse_leverage_type(p.get_choice("leverage_type", {"key", "value", "kv_avg", "kv_product"}));
            o.random_projection = p.get_bool("use_random_leverage");
            o.local = p.get_bool("use_local_approximation");
            o.window = p.get_int("local_window_size", 1, 1 << 20);
            o.seed = p.get_int("seed", 0, 0xFFFFFFFFLL);
            return std::make_unique<CurPress>(p, b, std::move(parts), o);
          },
          scored_press_role};
}

}  // namespace deferkv
