// SnapKV [docs/methods/snapkv.md]: the last w prompt queries score the older prompt entries;
// each KV head keeps its top b - w (max-pooled) plus the window, at the end of prefill.
#include "press/core/window_scoring.h"

namespace deferkv {

PressMethod snapkv_method() {
  return window_scored_method("snapkv", "window attention of the last prompt queries, top-k per KV head at prefill end",
                              "SnapKV, arXiv 2404.14469", {});
}

}  // namespace deferkv
