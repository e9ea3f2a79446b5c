#pragma once
// SnapKV, PyramidKV and AdaKV: the same window scoring at the end of the prefill,
// differing only in how the budget is allocated over layers and heads.
#include "press/window_scoring.h"

namespace deferkv {

class WindowScoredPress final : public OneShotPress {
 public:
  WindowScoredPress(const PressParams& params, const KvBudget& budget, const WindowScoring& scoring,
                    Allocation allocation, int64_t beta, double alpha)
      : OneShotPress(params, budget, scoring.window, 0, window_capture(scoring)),
        scoring_(scoring), allocation_(allocation), beta_(beta), alpha_(alpha) {}

 protected:
  std::vector<std::vector<int32_t>> choose(const LayerEviction& layer) override {
    return select_by_allocation(layer, pooled_candidate_scores(layer, layer.prompt_attention, scoring_),
                                allocation_, beta_, alpha_);
  }

 private:
  WindowScoring scoring_;
  Allocation allocation_;
  int64_t beta_;
  double alpha_;
};

}  // namespace deferkv
