// PyramidKV [docs/methods/pyramidkv.md]: SnapKV's scores with layer budgets falling linearly from
// the bottom layer to the top (steepness beta), averaging b per head: SnapKV with alloc=pyramid.
#include "press/core/window_scoring.h"

namespace deferkv {

PressMethod pyramidkv_method() {
  return window_scored_method("pyramidkv", "SnapKV scoring with pyramidal (linearly decreasing) layer budgets",
                              "PyramidKV, arXiv 2406.02069", {.alloc = AllocationKind::kPyramid});
}

}  // namespace deferkv
