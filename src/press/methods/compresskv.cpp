// CompressKV [docs/methods/compresskv.md]: only a few semantic retrieval heads per layer observe
// (found offline, read from a profile file), and layer budgets follow offline error
// sensitivity. Per layer, at the end of the prefill: the window attention of the last w
// prompt queries, summed over the window, averaged over the layer's first_k retrieval
// heads and avg-pooled, picks the top b_l - w older entries; every KV head keeps the same
// positions, plus the window. b_l: error-aware allocation of b*L over the layers, within
// [min(32, b), 3b]. The profile must come from this model (layers and heads are checked).
#include <algorithm>

#include "deferkv/error.h"
#include "kv/kv_cache.h"
#include "press/core/allocation.h"
#include "press/core/attention_sums.h"
#include "press/core/compresskv_profile.h"
#include "press/core/pooling.h"
#include "press/core/prompt_press.h"
#include "press/registry.h"

namespace deferkv {
namespace {

class CompressKvPress final : public PromptPress {
 public:
  CompressKvPress(const PressParams& params, const KvBudget& budget, CompressKvProfile profile, int64_t first_k,
                  int64_t window, int64_t kernel, Pooling pooling)
      : PromptPress(params, budget, protected_window(window)), profile_(std::move(profile)), window_(window),
        kernel_(kernel), pooling_(pooling) {
    for (const auto& heads : profile_.retrieval_heads) {
      std::vector<float> weights(static_cast<size_t>(profile_.n_head), 0.0f);
      const auto k = std::min<int64_t>(first_k, static_cast<int64_t>(heads.size()));
      for (int64_t i = 0; i < k; ++i) weights[static_cast<size_t>(heads[i])] = 1.0f / static_cast<float>(k);
      head_weights_.push_back(std::move(weights));
    }
  }

  void on_attach(const PressModelShape& shape, PressHost& host) override {
    PromptPress::on_attach(shape, host);
    if (shape.n_layer != profile_.n_layer || shape.n_head != profile_.n_head) {
      fail("the CompressKV profile is for a model with {} layers and {} heads ('{}'); this model has {} and {}",
           profile_.n_layer, profile_.n_head, profile_.model_name, shape.n_layer, shape.n_head);
    }
  }

  // A layer's budget is fixed from the profile at the prompt's beginning, and its scores
  // are final once the prompt has passed it: it is evicted there.
  PressPoints points() const override { return PromptPress::points().with(PressPoint::kPromptLayerEnd); }
  void act(const PressAt& at, KvCache& cache) override {
    PromptPress::act(at, cache);
    if (at.point == PressPoint::kPromptBegin) {
      const int64_t b = budget_entries();
      layer_budgets_ = error_aware_layer_budgets(profile_.layer_scores, b, calibrated_floor(b), calibrated_cap(b));
      scores_.clear();
      evicted_layers_ = 0;
    } else if (at.point == PressPoint::kPromptLayerEnd) {
      evict_layer(cache, at.layer);
      if (at.layer == cache.n_layer() - 1) scores_.clear();
    }
  }

  void on_attention(const AttentionEvent& event) override {
    if (prompt_end() <= window_ || event.positions[0] >= prompt_end()) return;
    const int64_t skip = std::clamp<int64_t>(prompt_end() - window_ - event.positions[0], 0, event.n);
    if (skip == event.n) return;
    add_attention(event, skip, RowReduction::kWeightedSum, GroupReduction::kSum, scores_,
                  head_weights_[static_cast<size_t>(event.layer)].data());
  }

 private:
  // Layer l (the next one: evicted_layers_).
  void evict_layer(KvCache& cache, int64_t l) {
    if (l != evicted_layers_) fail("internal: '{}' evicts layer {} after {} layers", description(), l, evicted_layers_);
    ++evicted_layers_;
    if (static_cast<size_t>(l) >= scores_.size()) return;  // nothing observed: the prompt is within the window
    const int64_t budget = layer_budgets_[static_cast<size_t>(l)];
    if (!prompt_outgrows(prompt_end(), budget, window_)) return;
    const int64_t candidates = prompt_end() - window_;
    std::vector<float> shared(static_cast<size_t>(candidates), 0.0f);
    for (const auto& head : scores_[static_cast<size_t>(l)]) {
      for (int64_t j = 0; j < candidates; ++j) shared[j] += head[j];
    }
    scores_[static_cast<size_t>(l)] = {};
    const std::vector<int32_t> keep =
        top_k_then_range(pool_scores(shared, pooling_, kernel_), budget - window_, prompt_end());
    for (int64_t g = 0; g < cache.n_head_kv(); ++g) {
      if (cache.length(l, g) != prompt_end()) fail("internal: compresskv needs every prompt entry in the cache");
      cache.retain(l, g, keep);
    }
  }

  CompressKvProfile profile_;
  int64_t window_, kernel_;
  Pooling pooling_;
  std::vector<std::vector<float>> head_weights_;  // [layer][query head]: 1/k on the retrieval heads
  std::vector<int64_t> layer_budgets_;
  LayerAttention scores_;
  int64_t evicted_layers_ = 0;  // of this prefill's eviction
};

}  // namespace

PressMethod compresskv_method() {
  return {{"compresskv", "semantic retrieval heads observe; error-aware layer budgets (needs a calibration profile)",
           "CompressKV, arXiv 2508.02401",
           {{"profile", "", "calibration profile JSON (semantic retrieval heads and layer error scores)"},
            {"first_k", "4", "retrieval heads per layer that observe"},
            {"window", "8", "observation window (always kept)"},
            {"kernel", "5", "pooling kernel"},
            {"pooling", "avg", "avg | max | none"}}},
          [](const PressParams& p, const KvBudget& b) -> std::unique_ptr<Press> {
            const std::string path = p.get_string("profile");
            if (path.empty()) fail("press 'compresskv' needs profile=PATH (a calibration profile JSON)");
            return std::make_unique<CompressKvPress>(p, b, load_compresskv_profile(path), p.get_int("first_k", 1, 1 << 16),
                                                     p.get_int("window", 0, 1 << 20), p.get_int("kernel", 1, 1023),
                                                     parse_pooling(p.get_choice("pooling", {"avg", "max", "none"})));
          }};
}

}  // namespace deferkv
