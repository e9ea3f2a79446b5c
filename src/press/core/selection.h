#pragma once
// Selection: which candidates to keep from their scores, given each head's count from
// the allocation [docs/methods/README.md, "Selection"]: the top-k of each head, or whole
// chunks of consecutive candidates shared by the layer's heads (ChunkKV), with the first
// `sinks` candidates always kept. Ties are broken towards the lower index (the earlier
// token), so every choice is deterministic.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "deferkv/press.h"
#include "press/core/head_scores.h"
#include "press/core/press_params.h"

namespace deferkv {

struct Selection {
  int64_t sinks = 0;  // the first candidates of each head, always kept (counted in the budget)
  int64_t chunk = 0;  // > 0: whole chunks of this many candidates, the same for every head
  int64_t reuse = 1;  // chunks: in each block of `reuse` layers the first layer's choice serves all
};

// The parameters chunk (with the method's default) and reuse.
std::vector<PressParameter> selection_parameters(int64_t chunk_default);
// Reads chunk and reuse where the method declares them (sinks are the method's own).
Selection read_selection(const PressParams& params);

// Chooses one layer's candidates: scores[g] holds head g's candidate scores, counts[g]
// (from the allocation) how many of them to keep. Per head the top counts[g]; or, with
// chunks, the best max(1, counts[0] / chunk) chunks by the heads' scores summed over
// the candidates every head has, for every head. A selector lives for one eviction: it
// carries the chunk choice from the first layer of a reuse block to the next ones.
// Returns per head the indices into scores[g] it does not keep, ascending: what the
// eviction drops. A per-step press drops a few of many, so the kept are never listed.
class LayerSelector {
 public:
  explicit LayerSelector(const Selection& selection) : selection_(selection) {}
  std::vector<std::vector<int32_t>> dropped(int64_t layer, const HeadScores& scores,
                                            const std::vector<int64_t>& counts);

 private:
  Selection selection_;
  std::vector<int32_t> leader_;  // the chunk choice of the block's first layer
};

// Indices of the k highest scores, ascending. k is clamped to [0, scores.size()].
std::vector<int32_t> top_k(std::span<const float> scores, int64_t k);
// The other indices, ascending: those not among the k highest (the complement of top_k).
std::vector<int32_t> outside_top_k(std::span<const float> scores, int64_t k);

// ChunkKV: splits [0, n) into chunks of `chunk` consecutive indices (the last may be
// shorter), scores each by the mean of its scores, and returns every index of the
// `n_chunks` best chunks, ascending.
std::vector<int32_t> top_chunks(const std::vector<float>& scores, int64_t chunk, int64_t n_chunks);

// [0, n) without `indices` (ascending, each < n), ascending.
std::vector<int32_t> complement(const std::vector<int32_t>& indices, int64_t n);

// Merges two ascending index lists into one ascending list without duplicates.
std::vector<int32_t> merge_indices(const std::vector<int32_t>& a, const std::vector<int32_t>& b);

// Indices [begin, end).
std::vector<int32_t> index_range(int64_t begin, int64_t end);

}  // namespace deferkv
