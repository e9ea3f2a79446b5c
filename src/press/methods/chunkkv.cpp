// ChunkKV [docs/methods/chunkkv.md]: SnapKV's pooled scores summed over the KV heads, averaged
// over chunks of c consecutive candidates; the best floor((b - w) / c) chunks (at least
// one) are kept whole, the same for every head, plus the window. Layer-wise index
// reuse: in each block of `reuse` layers, the first layer's choice serves the others.
// [OUR FORMULATION] budget left over by whole chunks stays unused.
#include <algorithm>

#include "press/registry.h"
#include "press/selection.h"
#include "press/window_scoring.h"

namespace deferkv {
namespace {

class ChunkKvPress final : public OneShotPress {
 public:
  ChunkKvPress(const PressParams& params, const KvBudget& budget, const WindowScoring& scoring, int64_t chunk,
               int64_t reuse)
      : OneShotPress(params, budget, scoring.window, 0, window_capture(scoring)),
        scoring_(scoring), chunk_(chunk), reuse_(reuse) {}

 protected:
  std::vector<std::vector<int32_t>> choose(const LayerEviction& layer) override {
    const int64_t c = *std::min_element(layer.candidates.begin(), layer.candidates.end());
    if (layer.layer % reuse_ != 0 && !leader_choice_.empty()) return shared(layer, leader_choice_, c);
    const auto pooled = pooled_candidate_scores(layer, layer.prompt_attention, scoring_);
    std::vector<float> token_scores(static_cast<size_t>(c), 0.0f);
    for (const auto& head : pooled) {
      for (int64_t j = 0; j < c; ++j) token_scores[j] += head[j];
    }
    const int64_t n_chunks = std::max<int64_t>(1, layer.candidate_budget() / chunk_);
    leader_choice_ = top_chunks(token_scores, chunk_, n_chunks);
    return shared(layer, leader_choice_, c);
  }

 private:
  static std::vector<std::vector<int32_t>> shared(const LayerEviction& layer, const std::vector<int32_t>& choice,
                                                  int64_t c) {
    std::vector<int32_t> kept;
    for (int32_t j : choice) {
      if (j < c) kept.push_back(j);
    }
    return std::vector<std::vector<int32_t>>(static_cast<size_t>(layer.n_head_kv()), kept);
  }

  WindowScoring scoring_;
  int64_t chunk_;
  int64_t reuse_;
  std::vector<int32_t> leader_choice_;
};

}  // namespace

PressMethod chunkkv_method() {
  auto params = window_scoring_parameters(32, 7, "max");
  params.push_back({"chunk", "10", "tokens per chunk"});
  params.push_back({"reuse", "1", "layers sharing one chunk choice (1: every layer chooses)"});
  return {{"chunkkv", "whole chunks of consecutive tokens chosen by SnapKV scores, shared by all heads",
           "ChunkKV, arXiv 2502.00299", params},
          [](const PressParams& p, const KvBudget& b) -> std::unique_ptr<Press> {
            return std::make_unique<ChunkKvPress>(p, b, read_window_scoring(p), p.get_int("chunk", 1, 1 << 20),
                                                  p.get_int("reuse", 1, 1 << 20));
          }};
}

}  // namespace deferkv
