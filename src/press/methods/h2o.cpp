// H2O [docs/methods/h2o.md]: heavy hitters, the entries that have drawn the most attention
// from every query so far, plus the most recent tokens.
//
// per_step=false (default; the one-shot form the KV-compression papers compare with):
// at the end of the prefill every prompt query's attention is summed per entry (no
// normalisation by how many queries see an entry, hence a lean towards early tokens),
// and each KV head keeps its top b - window plus the last `window` prompt tokens.
// per_step=true (the original): the sums keep accumulating over decode queries, and
// after the prefill and every decode step (every=n: every n-th) each head holding more
// than b entries keeps its newest `recent` entries and the top b - recent of the older
// ones, generated tokens included.
#include <algorithm>

#include "deferkv/error.h"
#include "kernels/attention_observation.h"
#include "kernels/attention_tap.h"
#include "kv/kv_cache.h"
#include "press/one_shot_press.h"
#include "press/registry.h"
#include "press/selection.h"

namespace deferkv {
namespace {

class OneShotH2oPress final : public OneShotPress {
 public:
  OneShotH2oPress(const PressParams& params, const KvBudget& budget, int64_t window)
      : OneShotPress(params, budget, window, 0, capture()) {}

 protected:
  std::vector<std::vector<int32_t>> choose(const LayerEviction& layer) override {
    std::vector<std::vector<int32_t>> keep(static_cast<size_t>(layer.n_head_kv()));
    for (int64_t g = 0; g < layer.n_head_kv(); ++g) {
      const auto& a = layer.prompt_attention[g];
      keep[g] = top_k(std::vector<float>(a.begin(), a.begin() + layer.candidates[g]), layer.candidate_budget());
    }
    return keep;
  }

 private:
  static CaptureConfig capture() {
    CaptureConfig c;
    c.all_prompt_queries = true;
    return c;
  }
};

class PerStepH2oPress final : public Press {
 public:
  PerStepH2oPress(const PressParams& params, const KvBudget& budget, int64_t recent, int64_t every)
      : description_(params.describe()), budget_(budget), recent_(recent), every_(every) {
    if (!budget.is_ratio() && budget.resolve(0) <= recent) {
      fail("h2o: the budget of {} per head leaves no room for heavy hitters beside {} recent entries",
           budget.resolve(0), recent);
    }
  }

  std::string describe() const override { return description_; }

  void on_prefill_begin(int64_t first_position, int64_t n_tokens) override {
    budget_entries_ = budget_.resolve(first_position + n_tokens);
  }

  void on_attention(const AttentionEvent& event) override {
    if (sums_.size() <= static_cast<size_t>(event.layer)) sums_.resize(static_cast<size_t>(event.layer) + 1);
    auto& heads = sums_[static_cast<size_t>(event.layer)];
    heads.resize(event.kv.size());
    for (size_t g = 0; g < heads.size(); ++g) heads[g].resize(static_cast<size_t>(event.kv[g].length), 0.0f);
    const int64_t stride = event.shape.n_head * event.shape.head_dim;
    observe_attention({event.queries, stride, event.positions, nullptr, event.n}, event.shape, event.kv,
                      RowReduction::kWeightedSum, GroupReduction::kMean, heads, event.pool);
  }

  void on_prefill_end(KvCache& cache) override { evict(cache); }
  void on_decode_step(KvCache& cache, int64_t step) override {
    if (step % every_ == 0) evict(cache);
  }

 private:
  void evict(KvCache& cache) {
    for (int64_t l = 0; l < cache.n_layer() && static_cast<size_t>(l) < sums_.size(); ++l) {
      for (int64_t g = 0; g < cache.n_head_kv(); ++g) {
        std::vector<float>& sums = sums_[static_cast<size_t>(l)][static_cast<size_t>(g)];
        const int64_t len = cache.length(l, g);
        if (len <= budget_entries_) continue;
        const int64_t recent = std::min(recent_, budget_entries_);
        const int64_t older = len - recent;
        std::vector<int32_t> keep = top_k(std::vector<float>(sums.begin(), sums.begin() + older), budget_entries_ - recent);
        keep = merge_indices(keep, index_range(older, len));
        cache.retain(l, g, keep);
        std::vector<float> kept_sums;
        for (int32_t j : keep) kept_sums.push_back(sums[j]);
        sums = std::move(kept_sums);
      }
    }
  }

  std::string description_;
  KvBudget budget_;
  int64_t recent_;
  int64_t every_;
  int64_t budget_entries_ = 0;
  std::vector<std::vector<std::vector<float>>> sums_;  // [layer][g][entry]: attention drawn so far
};

}  // namespace

PressMethod h2o_method() {
  return {{"h2o", "heavy hitters: attention summed over every query, top-k per KV head plus recent tokens",
           "H2O, arXiv 2306.14048",
           {{"window", "8", "one-shot: recent prompt tokens always kept"},
            {"per_step", "false", "evict after every decode step too (the original method)"},
            {"recent", "0", "per_step: newest entries always kept (0: half the budget, as the original's 10%+10%)"},
            {"every", "1", "per_step: evict every n-th decode step"}}},
          [](const PressParams& p, const KvBudget& b) -> std::unique_ptr<Press> {
            if (!p.get_bool("per_step")) return std::make_unique<OneShotH2oPress>(p, b, p.get_int("window", 0, 1 << 20));
            int64_t recent = p.get_int("recent", 0, 1 << 20);
            if (recent == 0) {
              if (b.is_ratio()) fail("h2o:per_step=true with --kv-ratio needs an explicit recent=N");
              recent = b.resolve(0) / 2;
            }
            return std::make_unique<PerStepH2oPress>(p, b, recent, p.get_int("every", 1, 1 << 20));
          },
          [](const PressParams& p) {
            const bool per_step = p.get_bool("per_step");
            return PressRole{true, per_step, "", false, !per_step};
          }};
}

}  // namespace deferkv
