// SnapKV [docs/methods/snapkv.md]: the last w prompt queries score the older prompt entries;
// each KV head keeps its top b - w (max-pooled) plus the window, at the end of prefill.
#include "press/registry.h"
#include "press/window_scored_press.h"

namespace deferkv {

PressMethod snapkv_method() {
  return {{"snapkv", "window attention of the last prompt queries, top-k per KV head at prefill end",
           "SnapKV, arXiv 2404.14469", window_scoring_parameters(32, 7, "max")},
          [](const PressParams& p, const KvBudget& b) -> std::unique_ptr<Press> {
            return std::make_unique<WindowScoredPress>(p, b, read_window_scoring(p), Allocation::kUniform, 1, 0.0);
          }};
}

}  // namespace deferkv
