#pragma once
// Choosing which entries to keep from their scores. Ties are broken towards the lower
// index (the earlier token), so every choice is deterministic.
#include <cstdint>
#include <vector>

namespace deferkv {

// Indices of the k highest scores, ascending. k is clamped to [0, scores.size()].
std::vector<int32_t> top_k(const std::vector<float>& scores, int64_t k);

// ChunkKV: splits [0, n) into chunks of `chunk` consecutive indices (the last may be
// shorter), scores each by the mean of its scores, and returns every index of the
// `n_chunks` best chunks, ascending.
std::vector<int32_t> top_chunks(const std::vector<float>& scores, int64_t chunk, int64_t n_chunks);

// Merges two ascending index lists into one ascending list without duplicates.
std::vector<int32_t> merge_indices(const std::vector<int32_t>& a, const std::vector<int32_t>& b);

// Indices [begin, end).
std::vector<int32_t> index_range(int64_t begin, int64_t end);

}  // namespace deferkv
