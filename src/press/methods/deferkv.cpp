// DeferKV [docs/methods/deferkv.md]: the one-shot eviction of SnapKV / PyramidKV / AdaKV is
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
// pool_order=fuse_then_pool [OUR FORMULATION]: the base's pooling runs once, on F;
// pool_then_fuse pools each observation's scores before fusing (the same for avg-pool,
// different for max-pool).
#include "press/registry.h"
#include "press/temporal_fusion.h"
#include "press/window_scoring.h"

namespace deferkv {
namespace {

CaptureConfig deferkv_capture(const WindowScoring& scoring, const TemporalFusion& fusion) {
  CaptureConfig c = window_capture(scoring);
  c.window_weights = fusion.window_weights;
  c.decode_steps = static_cast<int64_t>(fusion.decode_weights.size());
  return c;
}

class DeferKvPress final : public OneShotPress {
 public:
  DeferKvPress(const PressParams& params, const KvBudget& budget, const WindowScoring& scoring, int64_t delay,
               const TemporalFusion& fusion, bool pool_first, Allocation base, int64_t beta, double alpha)
      : OneShotPress(params, budget, scoring.window, delay, deferkv_capture(scoring, fusion)),
        scoring_(scoring), fusion_(fusion), pool_first_(pool_first), base_(base), beta_(beta), alpha_(alpha) {}

 protected:
  std::vector<std::vector<int32_t>> choose(const LayerEviction& layer) override {
    // Each observation's scores over the candidates, pooled first when asked.
    auto observed = [&](const std::vector<std::vector<float>>& attention) {
      return pool_first_ ? pooled_candidate_scores(layer, attention, scoring_) : attention;
    };
    const auto prompt = observed(layer.prompt_attention);
    std::vector<std::vector<std::vector<float>>> steps;
    for (const auto& step : layer.decode_attention) steps.push_back(observed(step));
    std::vector<std::vector<float>> fused(static_cast<size_t>(layer.n_head_kv()));
    for (int64_t g = 0; g < layer.n_head_kv(); ++g) {
      std::vector<const std::vector<float>*> decode;
      for (const auto& step : steps) decode.push_back(&step[g]);
      fused[g] = fusion_.fuse(prompt[g], decode, layer.candidates[g]);
    }
    return select_by_allocation(layer, pool_first_ ? fused : pooled_candidate_scores(layer, fused, scoring_), base_,
                                beta_, alpha_);
  }

 private:
  WindowScoring scoring_;
  TemporalFusion fusion_;
  bool pool_first_;
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
      {"pool_order", "fuse_then_pool", "fuse_then_pool | pool_then_fuse (each observation pooled before fusion)"},
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
            const TemporalFusion fusion = TemporalFusion::make(scoring.window, d, eta, per_query, !p.get_bool("no_decode_feedback"));
            const bool pool_first = p.get_choice("pool_order", {"fuse_then_pool", "pool_then_fuse"}) == "pool_then_fuse";
            return std::make_unique<DeferKvPress>(p, b, scoring, d, fusion, pool_first,
                                                  parse_allocation(p.get_choice("base", {"snapkv", "pyramidkv", "adakv"})),
                                                  p.get_int("beta", 1, 1 << 20), p.get_double("alpha", 0.0, 1.0));
          },
          [](const PressParams&) { return PressRole{true, false, "", false, false}; }};  // at decode step d
}

}  // namespace deferkv
