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
// pool=P [OUR FORMULATION] (the paper keeps the whole prompt until step d): each layer is
// cut inside the prefill to a candidate pool of P entries per KV head by the prompt
// window's scores under the base's allocation (press/core/candidate_pool.h); the first d
// steps decode on the pool and step d chooses the budget from it. pool_ahead=n carries each
// window score to the n entries after it first: the decode steps read on from where the
// window reads (a copied value's later tokens), which the window's own scores leave out.
#include <algorithm>

#include "deferkv/error.h"
#include "press/core/window_scoring.h"
#include "press/methods/deferkv/temporal_fusion.h"

namespace deferkv {
namespace {

class DeferKvPress final : public ScoredPress {
 public:
  DeferKvPress(const PressParams& params, const KvBudget& budget, ScoredParts parts, const WindowScoring& scoring,
               const TemporalFusion& fusion, bool pool_first, int64_t pool_ahead)
      : ScoredPress(params, budget, std::move(parts)), scoring_(scoring), fusion_(fusion), pool_first_(pool_first),
        pool_ahead_(pool_ahead) {}

 protected:
  std::vector<std::vector<float>> score(const LayerEviction& layer) override {
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
    return pool_first_ ? fused : pooled_candidate_scores(layer, fused, scoring_);
  }
  // The candidate pool [OUR FORMULATION]: before any decode step, the prompt window's
  // scores with the base's pooling (SnapKV's score, scaled by eta^d in block mode; the
  // discounted window in per_query mode).
  std::vector<std::vector<float>> pool_score(const LayerEviction& layer) override {
    std::vector<std::vector<float>> scores = pooled_candidate_scores(layer, layer.prompt_attention, scoring_);
    if (pool_ahead_ > 0) {
      for (int64_t g = 0; g < layer.n_head_kv(); ++g) scores[g] = carried_ahead(scores[g], layer.candidates[g]);
    }
    return scores;
  }
  // The fused score reads the window's capture and the decode steps only: a deferred
  // compressed context stores the first and each question adds its own (the window's
  // temporal weights depend on d alone, part of the description) [OUR FORMULATION].
  bool resumes_from_captures() const override { return true; }

 private:
  // s[i] := max(s[i - pool_ahead], ..., s[i]) over the first n candidates: an entry the window
  // attends to brings the pool_ahead entries after it into the pool.
  std::vector<float> carried_ahead(const std::vector<float>& s, int64_t n) const {
    std::vector<float> out(s);
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = std::max<int64_t>(0, i - pool_ahead_); j < i; ++j) out[i] = std::max(out[i], s[j]);
    }
    return out;
  }

  WindowScoring scoring_;
  TemporalFusion fusion_;
  bool pool_first_;
  int64_t pool_ahead_;
};

}  // namespace

PressMethod deferkv_method() {
  std::vector<PressParameter> params = {
      delay_parameter("1"),
      {"eta", "0.7", "temporal discount per step of age"},
      {"temporal_mode", "block", "block (the window is one observation) | per_query"},
      {"no_decode_feedback", "false", "ablation: score with the prompt window only (still evict at step d)"},
      {"no_temporal_weighting", "false", "ablation: eta = 1"},
      {"pool_order", "fuse_then_pool", "fuse_then_pool | pool_then_fuse (each observation pooled before fusion)"},
      candidate_pool_parameter(kDefaultCandidatePool),
      {"pool_ahead", "8", "with a pool: each entry also takes the highest window score of the n entries before it "
                          "(the continuation the first decode steps read comes into the pool)"},
  };
  for (const auto& group : {window_scoring_parameters(32, 7, Pooling::kMax),
                            allocation_parameters(AllocationKey::kBase, AllocationKind::kUniform),
                            selection_parameters(0)}) {
    params.insert(params.end(), group.begin(), group.end());
  }
  return {{"deferkv", "one-shot eviction deferred to decode step d, scored by prompt and decode queries",
           "DeferKV, arXiv 2610.06286", params},
          [](const PressParams& p, const KvBudget& b) -> std::unique_ptr<Press> {
            const WindowScoring scoring = read_window_scoring(p);
            ScoredParts parts = read_scored_parts(p);
            const int64_t d = parts.trigger.delay();
            if (d < 1 || d > 1024) fail("press 'deferkv': d={} is out of range [1, 1024]", d);
            const double eta = p.get_bool("no_temporal_weighting") ? 1.0 : p.get_double("eta", 1e-6, 1.0);
            const bool per_query = p.get_choice("temporal_mode", {"block", "per_query"}) == "per_query";
            const TemporalFusion fusion =
                TemporalFusion::make(scoring.window, d, eta, per_query, !p.get_bool("no_decode_feedback"));
            const bool pool_first = p.get_choice("pool_order", {"fuse_then_pool", "pool_then_fuse"}) == "pool_then_fuse";
            parts.capture = window_capture(scoring);
            parts.capture.observations = {Observation::prompt_window(scoring.window, fusion.window_weights)};
            const auto steps = static_cast<int64_t>(fusion.decode_weights.size());
            if (steps > 0) parts.capture.observations.push_back(Observation::decode_steps(steps));
            parts.window = scoring.window;
            const int64_t pool_ahead = p.get_int("pool_ahead", 0, 1 << 20);
            return std::make_unique<DeferKvPress>(p, b, std::move(parts), scoring, fusion, pool_first, pool_ahead);
          },
          [](const PressParams& p) {
            PressRole role = scored_press_role(p);
            role.resumes_deferred = true;
            return role;
          }};
}

}  // namespace deferkv
