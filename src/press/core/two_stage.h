#pragma once
// CriticalKV's two-stage selection [docs/methods/criticalkv.md] on any scorer's scores:
// once the allocation has said how many candidates k a head keeps, its best
// floor(first_stage_ratio * k) by the scorer's own score are kept outright (stage 1) and
// the others compete on (score + epsilon) * ||W_O v_j||_1 (stage 2), the L1 norm of the
// entry's value through the attention output projection, averaged over the query heads
// that read it. An entry whose value barely moves the layer's output is worth less than
// its attention says (Feng et al., arXiv 2502.03805; kvpress's CriticalKVPress).
//
// The allocation reads the scorer's scores, not the rescored ones, so with alloc=adakv the
// head budgets come from the base scores and each head's two stages fill its own budget:
// kvpress's CriticalAdaKVPress. [OUR FORMULATION] Stage 1 counts the head's candidates
// only (the protected window is kept outside both stages); kvpress counts its padded
// window among stage 1's floor(ratio * n_kept).
#include <cstdint>
#include <span>
#include <vector>

#include "deferkv/press.h"
#include "press/core/press_params.h"

namespace deferkv {

class KvCache;

struct TwoStageSelection {
  double first_stage_ratio = 0.5;
  double epsilon = 1e-4;
};

// The parameters first_stage_ratio and epsilon (kvpress's defaults) and their reading.
std::vector<PressParameter> two_stage_parameters();
TwoStageSelection read_two_stage(const PressParams& params);

// ||W_O v_j||_1 per candidate j < candidates of KV head g of `layer`, the mean over the
// group's query heads h of sum_e |sum_i W_O[e, h*d + i] v_j[i]|. w_o: [n_embd x n_head * d]
// row-major (ModelReadout::attention_output).
std::vector<float> projected_value_norms(const KvCache& cache, int64_t layer, int64_t g, int64_t candidates,
                                         const std::vector<float>& w_o, int64_t n_embd, int64_t n_head);

// Rewrites one head's candidate scores in place for a head keeping `kept` of them: the
// stage-1 entries score the float maximum, the others (s + epsilon) * norm.
void two_stage_rescore(std::span<float> scores, int64_t kept, std::span<const float> norms,
                       const TwoStageSelection& rule);

}  // namespace deferkv
