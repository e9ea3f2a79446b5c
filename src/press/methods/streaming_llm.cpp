// StreamingLLM, one-shot [methods.md §6.2] as the compression papers run it: keep the
// first `sinks` prompt tokens (attention sinks) and the last b - sinks, original
// positions kept (no re-rotation).
#include <algorithm>

#include "press/one_shot_press.h"
#include "press/registry.h"
#include "press/selection.h"

namespace deferkv {
namespace {

class StreamingLlmPress final : public OneShotPress {
 public:
  StreamingLlmPress(const PressParams& params, const KvBudget& budget, int64_t sinks)
      : OneShotPress(params, budget, 0, 0, {}), sinks_(sinks) {}

 protected:
  std::vector<std::vector<int32_t>> choose(const LayerEviction& layer) override {
    std::vector<std::vector<int32_t>> keep(static_cast<size_t>(layer.n_head_kv()));
    const int64_t sinks = std::min(sinks_, layer.budget);
    for (int64_t g = 0; g < layer.n_head_kv(); ++g) {
      const int64_t c = layer.candidates[g];
      keep[g] = merge_indices(index_range(0, std::min(sinks, c)), index_range(std::max<int64_t>(0, c - (layer.budget - sinks)), c));
    }
    return keep;
  }

 private:
  int64_t sinks_;
};

}  // namespace

PressMethod streaming_llm_method() {
  return {{"streaming_llm", "attention sinks plus the most recent prompt tokens, at prefill end",
           "StreamingLLM, arXiv 2309.17453",
           {{"sinks", "4", "first prompt tokens always kept"}}},
          [](const PressParams& p, const KvBudget& b) -> std::unique_ptr<Press> {
            return std::make_unique<StreamingLlmPress>(p, b, p.get_int("sinks", 0, 1 << 20));
          }};
}

}  // namespace deferkv
