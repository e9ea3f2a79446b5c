// PyramidKV [docs/methods/pyramidkv.md]: SnapKV's scores with layer budgets falling linearly from
// the bottom layer to the top (steepness beta), averaging b per head.
#include "press/registry.h"
#include "press/window_scored_press.h"

namespace deferkv {

PressMethod pyramidkv_method() {
  auto params = window_scoring_parameters(32, 7, "max");
  params.push_back({"beta", "20", "pyramid steepness: the top layer keeps (b - w) / beta"});
  return {{"pyramidkv", "SnapKV scoring with pyramidal (linearly decreasing) layer budgets",
           "PyramidKV, arXiv 2406.02069", params},
          [](const PressParams& p, const KvBudget& b) -> std::unique_ptr<Press> {
            return std::make_unique<WindowScoredPress>(p, b, read_window_scoring(p), Allocation::kPyramid,
                                                       p.get_int("beta", 1, 1 << 20), 0.0);
          }};
}

}  // namespace deferkv
