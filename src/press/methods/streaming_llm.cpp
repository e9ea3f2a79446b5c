// StreamingLLM [docs/methods/streaming_llm.md]: keep the first `sinks` tokens (attention sinks) and
// the most recent ones; original positions are kept (no re-rotation).
// per_step=false (default; the one-shot form the compression papers run): at the end
// of the prefill each head keeps the first `sinks` prompt tokens and the last b - sinks.
// per_step=true (the streaming original, as a sliding window): after the prefill and
// every decode step (every=n: every n-th) each head keeps its first `sinks` entries and
// its newest b - sinks, generated tokens included.
#include <algorithm>

#include "kv/kv_cache.h"
#include "press/one_shot_press.h"
#include "press/registry.h"
#include "press/selection.h"

namespace deferkv {
namespace {

// Of n entries, the first `sinks` and the last `budget - sinks`.
std::vector<int32_t> sinks_and_recent(int64_t n, int64_t sinks, int64_t budget) {
  sinks = std::min(sinks, budget);
  return merge_indices(index_range(0, std::min(sinks, n)), index_range(std::max<int64_t>(0, n - (budget - sinks)), n));
}

class StreamingLlmPress final : public OneShotPress {
 public:
  StreamingLlmPress(const PressParams& params, const KvBudget& budget, int64_t sinks)
      : OneShotPress(params, budget, 0, 0, {}), sinks_(sinks) {}

 protected:
  std::vector<std::vector<int32_t>> choose(const LayerEviction& layer) override {
    std::vector<std::vector<int32_t>> keep(static_cast<size_t>(layer.n_head_kv()));
    for (int64_t g = 0; g < layer.n_head_kv(); ++g) keep[g] = sinks_and_recent(layer.candidates[g], sinks_, layer.budget);
    return keep;
  }

 private:
  int64_t sinks_;
};

class SlidingStreamingLlmPress final : public Press {
 public:
  SlidingStreamingLlmPress(const PressParams& params, const KvBudget& budget, int64_t sinks, int64_t every)
      : description_(params.describe()), budget_(budget), sinks_(sinks), every_(every) {}

  std::string describe() const override { return description_; }
  void on_prefill_begin(int64_t first_position, int64_t n_tokens) override {
    budget_entries_ = budget_.resolve(first_position + n_tokens);
  }
  void on_prefill_end(KvCache& cache) override { slide(cache); }
  void on_decode_step(KvCache& cache, int64_t step) override {
    if (step % every_ == 0) slide(cache);
  }

 private:
  void slide(KvCache& cache) const {
    for (int64_t l = 0; l < cache.n_layer(); ++l) {
      for (int64_t g = 0; g < cache.n_head_kv(); ++g) {
        const int64_t n = cache.length(l, g);
        if (n > budget_entries_) cache.retain(l, g, sinks_and_recent(n, sinks_, budget_entries_));
      }
    }
  }

  std::string description_;
  KvBudget budget_;
  int64_t sinks_, every_;
  int64_t budget_entries_ = 0;
};

}  // namespace

PressMethod streaming_llm_method() {
  return {{"streaming_llm", "attention sinks plus the most recent tokens",
           "StreamingLLM, arXiv 2309.17453",
           {{"sinks", "4", "first tokens always kept"},
            {"per_step", "false", "slide the window at every decode step too (the streaming original)"},
            {"every", "1", "per_step: slide every n-th decode step"}}},
          [](const PressParams& p, const KvBudget& b) -> std::unique_ptr<Press> {
            const int64_t sinks = p.get_int("sinks", 0, 1 << 20);
            if (p.get_bool("per_step")) {
              return std::make_unique<SlidingStreamingLlmPress>(p, b, sinks, p.get_int("every", 1, 1 << 20));
            }
            return std::make_unique<StreamingLlmPress>(p, b, sinks);
          },
          [](const PressParams& p) {
            const bool per_step = p.get_bool("per_step");
            return PressRole{true, per_step, "", true, !per_step};
          }};
}

}  // namespace deferkv
