// DeferKV [methods.md §1]: the one-shot eviction of SnapKV / PyramidKV / AdaKV is
// deferred to decode step d. The first d decode steps run on the full cache; their
// queries join the prompt window as observers, weighted by a discount eta per step of
// age, and the base method then pools, allocates and selects as usual. The decode
// tokens' entries are kept.
//
// temporal_mode=block [OUR FORMULATION]: F = (eta^d S_P + sum_s eta^(d-s) S_s) / Z, the
// prompt window (mean of its w queries) counting as one observation one step older than
// decode step 1. temporal_mode=per_query: every window query and decode query is
// discounted by its own age. Ablations: no_decode_feedback (F = S_P, still evicting at
// step d) and no_temporal_weighting (eta = 1).
#include <cmath>

#include "press/registry.h"
#include "press/window_scoring.h"

namespace deferkv {
namespace {

struct Fusion {
  std::vector<float> window_weights;  // weight of each window query, oldest first
  std::vector<float> decode_weights;  // weight of decode step s at [s - 1]
  float normaliser = 1.0f;            // Z
};

Fusion make_fusion(int64_t window, int64_t d, double eta, bool per_query, bool decode_feedback) {
  Fusion f;
  f.window_weights.assign(static_cast<size_t>(window), 1.0f / static_cast<float>(window));
  if (!decode_feedback) {
    // F = S_P exactly as the base computes it, so the kept set equals the base's.
    if (per_query) {
      for (int64_t i = 0; i < window; ++i) f.window_weights[i] = static_cast<float>(std::pow(eta, window - 1 - i));
    }
    return f;
  }
  double z = 0;
  for (int64_t s = 1; s <= d; ++s) {
    f.decode_weights.push_back(static_cast<float>(std::pow(eta, d - s)));
    z += std::pow(eta, d - s);
  }
  for (int64_t i = 0; i < window; ++i) {
    const double w = per_query ? std::pow(eta, d + window - 1 - i) : std::pow(eta, d) / static_cast<double>(window);
    f.window_weights[i] = static_cast<float>(w);
    z += w;
  }
  f.normaliser = static_cast<float>(z);
  return f;
}

CaptureConfig deferkv_capture(const WindowScoring& scoring, const Fusion& fusion) {
  CaptureConfig c = window_capture(scoring);
  c.window_weights = fusion.window_weights;
  c.decode_steps = static_cast<int64_t>(fusion.decode_weights.size());
  return c;
}

class DeferKvPress final : public OneShotPress {
 public:
  DeferKvPress(const PressParams& params, const KvBudget& budget, const WindowScoring& scoring, int64_t delay,
               const Fusion& fusion, Allocation base, int64_t beta, double alpha)
      : OneShotPress(params, budget, scoring.window, delay, deferkv_capture(scoring, fusion)),
        scoring_(scoring), fusion_(fusion), base_(base), beta_(beta), alpha_(alpha) {}

 protected:
  std::vector<std::vector<int32_t>> choose(const LayerEviction& layer) override {
    std::vector<std::vector<float>> fused(static_cast<size_t>(layer.n_head_kv()));
    for (int64_t g = 0; g < layer.n_head_kv(); ++g) {
      const int64_t c = layer.candidates[g];
      std::vector<float>& f = fused[g];
      f.assign(layer.prompt_attention[g].begin(), layer.prompt_attention[g].begin() + c);
      for (size_t s = 0; s < fusion_.decode_weights.size(); ++s) {
        const std::vector<float>& d = layer.decode_attention[s][g];
        for (int64_t j = 0; j < c; ++j) f[j] += fusion_.decode_weights[s] * d[j];
      }
      for (float& x : f) x /= fusion_.normaliser;
    }
    return select_by_allocation(layer, pooled_candidate_scores(layer, fused, scoring_), base_, beta_, alpha_);
  }

 private:
  WindowScoring scoring_;
  Fusion fusion_;
  Allocation base_;
  int64_t beta_;
  double alpha_;
};

}  // namespace

PressMethod deferkv_method() {
  auto params = window_scoring_parameters(32, 7, "max");
  params.insert(params.begin(), {
      {"d", "1", "delay: evict after decode step d; decode queries 1..d join the observers"},
      {"eta", "0.7", "temporal discount per step of age"},
      {"temporal_mode", "block", "block (the window is one observation) | per_query"},
      {"base", "snapkv", "allocation of the base method: snapkv | pyramidkv | adakv"},
      {"no_decode_feedback", "false", "ablation: score with the prompt window only (still evict at step d)"},
      {"no_temporal_weighting", "false", "ablation: eta = 1"},
  });
  params.push_back({"beta", "20", "base=pyramidkv: pyramid steepness"});
  params.push_back({"alpha", "0.2", "base=adakv: per-head floor"});
  return {{"deferkv", "one-shot eviction deferred to decode step d, scored by prompt and decode queries",
           "DeferKV, arXiv 2610.06286", params},
          [](const PressParams& p, const KvBudget& b) -> std::unique_ptr<Press> {
            const WindowScoring scoring = read_window_scoring(p);
            const int64_t d = p.get_int("d", 1, 1024);
            const double eta = p.get_bool("no_temporal_weighting") ? 1.0 : p.get_double("eta", 1e-6, 1.0);
            const bool per_query = p.get_choice("temporal_mode", {"block", "per_query"}) == "per_query";
            const Fusion fusion = make_fusion(scoring.window, d, eta, per_query, !p.get_bool("no_decode_feedback"));
            return std::make_unique<DeferKvPress>(p, b, scoring, d, fusion,
                                                  parse_allocation(p.get_choice("base", {"snapkv", "pyramidkv", "adakv"})),
                                                  p.get_int("beta", 1, 1 << 20), p.get_double("alpha", 0.0, 1.0));
          }};
}

}  // namespace deferkv
