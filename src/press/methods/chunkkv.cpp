// ChunkKV [docs/methods/chunkkv.md]: SnapKV's pooled scores summed over the KV heads, averaged
// over chunks of c consecutive candidates; the best floor((b - w) / c) chunks (at least
// one) are kept whole, the same for every head, plus the window. Layer-wise index
// reuse: in each block of `reuse` layers, the first layer's choice serves the others.
// SnapKV with chunk=10 (the selection part, src/press/core/selection.h).
// [OUR FORMULATION] budget left over by whole chunks stays unused.
#include "press/core/window_scoring.h"

namespace deferkv {

PressMethod chunkkv_method() {
  return window_scored_method("chunkkv", "whole chunks of consecutive tokens chosen by SnapKV scores, shared by all heads",
                              "ChunkKV, arXiv 2502.00299", {.chunk = 10});
}

}  // namespace deferkv
