// AdaKV [docs/methods/adakv.md]: SnapKV's scores, with the layer's G*(b - w) entries shared
// among its KV heads by a flattened top-k (heads with flat attention get more), each
// head guaranteed a floor alpha of the average.
#include "press/registry.h"
#include "press/window_scored_press.h"

namespace deferkv {

PressMethod adakv_method() {
  auto params = window_scoring_parameters(32, 7, "max");
  params.push_back({"alpha", "0.2", "floor: every head keeps at least alpha * (b - w)"});
  return {{"adakv", "SnapKV scoring with head-adaptive budgets inside each layer",
           "Ada-KV, arXiv 2407.11550", params},
          [](const PressParams& p, const KvBudget& b) -> std::unique_ptr<Press> {
            return std::make_unique<WindowScoredPress>(p, b, read_window_scoring(p), Allocation::kAdaKv, 1,
                                                       p.get_double("alpha", 0.0, 1.0));
          }};
}

}  // namespace deferkv
