#pragma once
// What a press hands the forward pass to run after a prompt (LookaheadKV): rows of input
// embeddings fed instead of token ids, and per layer a low-rank delta for each of the
// projections, added for these rows only. Lives in observe/, below both the model and the
// presses, like the attention tap.
#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/low_rank_delta.h"

namespace deferkv {

// The seven linear projections of a transformer layer.
enum class Projection { kQ, kK, kV, kO, kGate, kUp, kDown };
inline constexpr size_t kProjectionCount = 7;

// Deltas of one layer, indexed by Projection (an empty delta leaves it unchanged).
using LayerDeltas = std::array<LowRankDelta, kProjectionCount>;

struct LookaheadRows {
  int64_t n_embd = 0;
  std::vector<float> embeddings;  // [n_rows() x n_embd], fed in order after the prompt
  std::vector<LayerDeltas> layers;  // [n_layer]

  int64_t n_rows() const { return n_embd == 0 ? 0 : static_cast<int64_t>(embeddings.size()) / n_embd; }
  const LowRankDelta& delta(int64_t layer, Projection p) const {
    return layers[static_cast<size_t>(layer)][static_cast<size_t>(p)];
  }
};

}  // namespace deferkv
