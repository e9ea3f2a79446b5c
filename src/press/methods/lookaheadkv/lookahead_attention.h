#pragma once
// The attention of lookahead rows (queries at positions >= the prompt's end, fed after
// it) on the prompt's entries, reduced over the rows and over each GQA group, per layer
// and KV head: LookaheadKV's importance scores [docs/methods/lookaheadkv.md]. Each row's softmax runs
// over the prompt entries only (the rows' own keys are left out, as LAQ does for its
// pseudo queries), so every row contributes a distribution over the prompt.
#include <cstdint>
#include <vector>

#include "observe/attention_observation.h"

namespace deferkv {

struct AttentionEvent;

class LookaheadAttention {
 public:
  // Forgets what was seen; rows at positions >= prompt_end will be observed, each
  // weighted by row_weight (1/n for a mean over n rows, 1 for a sum).
  void begin(int64_t prompt_end, float row_weight, GroupReduction group);
  // Accumulates the event's rows past the prompt (a batch of prompt tokens adds nothing).
  void observe(const AttentionEvent& event);
  // [g][j]: the score of head g's j-th prompt entry; empty when no row reached the layer.
  const std::vector<std::vector<float>>& layer(int64_t layer) const;

 private:
  int64_t prompt_end_ = 0;
  float row_weight_ = 1.0f;
  GroupReduction group_ = GroupReduction::kMean;
  std::vector<std::vector<std::vector<float>>> scores_;  // [layer][g][entry]
  std::vector<float> weights_;                           // row weights of one batch
};

}  // namespace deferkv
