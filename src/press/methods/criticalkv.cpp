// CriticalKV [docs/methods/criticalkv.md]: SnapKV's window scores, then two stages per
// KV head (press/core/two_stage.h): half of the head's kept candidates by the window
// score alone, the rest by the score times ||W_O v||_1, the entry's effect on the
// layer's output. With alloc=adakv the head budgets come from the window scores:
// CriticalAdaKV.
#include "press/core/window_scoring.h"

namespace deferkv {

PressMethod criticalkv_method() {
  return window_scored_method("criticalkv",
                              "SnapKV's window scores rescaled by the L1 norm of W_O v in a second stage, per KV head, "
                              "at prefill end (alloc=adakv: CriticalAdaKV)",
                              "Feng et al., arXiv 2502.03805", {}, two_stage_parameters());
}

}  // namespace deferkv
