// AdaKV [docs/methods/adakv.md]: SnapKV's scores, with the layer's G*(b - w) entries shared
// among its KV heads by a flattened top-k (heads with flat attention get more), each
// head guaranteed a floor alpha of the average: SnapKV with alloc=adakv.
#include "press/core/window_scoring.h"

namespace deferkv {

PressMethod adakv_method() {
  return window_scored_method("adakv", "SnapKV scoring with head-adaptive budgets inside each layer",
                              "Ada-KV, arXiv 2407.11550", {.alloc = AllocationKind::kAdaKv});
}

}  // namespace deferkv
