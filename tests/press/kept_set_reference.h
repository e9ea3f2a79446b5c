#pragma once
// The eviction methods' rules re-derived in double precision from the reference
// forward's queries and keys, from the definitions in docs/methods/: the independent side
// of kept_set_reference_test.cpp. Nothing here calls src/press.
//
// Ties: every rule ranks by score, highest first, and breaks an exact tie towards the
// lower index: the earlier position, the earlier chunk, the lower KV head (AdaKV's
// flattened ranking), the lower layer or head (the remainders of a rounding). The engine
// documents the same order (src/press/core/selection.h, src/press/core/allocation.h). Exact ties
// are common after max-pooling (a peak's value covers its neighbours), so this rule is
// exercised; ties between different attention values are left to chance, which the
// random inputs make negligible.
#include <cstdint>
#include <string>
#include <vector>

#include "model/reference_forward.h"

namespace deferkv::testing {

struct AttentionShape {
  int64_t n_head, n_head_kv, head_dim;
  int64_t group() const { return n_head / n_head_kv; }
};

// The kept-set tests' model, shared so that their reference traces agree: a random 4-layer
// GQA model (n_embd 64, 4 query heads, 2 KV heads, head_dim 16, n_ff 128, seed 29); four
// layers so that PyramidKV's step (max - min) / (L - 1) is not an integer and its rounding shows.
inline constexpr AttentionShape kKeptSetShape{4, 2, 16};
inline constexpr int64_t kKeptSetLayers = 4;
std::string kept_set_model_path();
// The first n of 498 distinct token ids in a fixed shuffle: a token seen twice would give
// layer 0 two keys of the same norm (RoPE is a rotation), a KNorm tie that rounding, not
// position, would break.
std::vector<int32_t> distinct_prompt(int64_t n);
// The reference forward of the kept-set model over distinct_prompt(n), computed once per n.
const ReferenceTrace& kept_set_trace(int64_t n);
// x (one head's row) rotated by RoPE at position t as the random Llama models rotate it:
// interleaved pairs (2i, 2i + 1) by t * 10000^(-2i / d). t < 0 undoes a rotation.
std::vector<double> rope_rotated(std::vector<double> x, double t);

using Scores = std::vector<double>;       // one per entry, by position
using Positions = std::vector<int32_t>;   // ascending

// Softmax of query position t of query head h over `keys` (positions), or over every key
// 0..t when `keys` is empty. Returns one probability per key of the list (or per 0..t).
Scores attention_row(const ReferenceTrace& trace, const AttentionShape& shape, int64_t layer, int64_t head,
                     int64_t t, const Positions& keys = {});

// sum_i weights[i] * mean over KV head g's query heads of P_{queries[i]}(j), for
// j < n_keys (causal: a query sees keys up to its own position).
Scores group_attention(const ReferenceTrace& trace, const AttentionShape& shape, int64_t layer, int64_t g,
                       const std::vector<int64_t>& queries, const std::vector<double>& weights, int64_t n_keys);

// The first n entries of s.
Scores first(const Scores& s, int64_t n);

// 1-D max-pooling, stride 1, odd kernel, positions outside the vector ignored.
Scores max_pool(const Scores& s, int64_t kernel);

// Indices of the k highest scores (ties: lower index first), ascending.
Positions best(const Scores& s, int64_t k);

// Every index of the n_chunks best chunks of `chunk` consecutive indices from 0 (the
// last one may be shorter), a chunk scored by the mean of its scores.
Positions best_chunks(const Scores& s, int64_t chunk, int64_t n_chunks);

// Integers, each the floor of its share plus one for the largest fractional parts (ties:
// lower index), summing to total.
std::vector<int64_t> largest_remainder(const std::vector<double>& shares, int64_t total);

// PyramidKV's layer budgets (non-window entries), exact rounding to L * min(base, C).
std::vector<int64_t> pyramid_budgets(int64_t base, int64_t candidates, int64_t n_layer, int64_t beta);

// The same pyramid as the reference code rounds it: layer l keeps max - l * ((max - min) // (L - 1)).
std::vector<int64_t> pyramid_budgets_floored_step(int64_t base, int64_t candidates, int64_t n_layer, int64_t beta);

// AdaKV's head budgets of one layer from its heads' pooled candidate scores.
std::vector<int64_t> adakv_budgets(const std::vector<Scores>& pooled, int64_t base, double alpha);

// ||k_j|| of KV head g in a layer.
double key_norm(const ReferenceTrace& trace, const AttentionShape& shape, int64_t layer, int64_t g, int64_t j);

// a ∪ b, ascending.
Positions united(const Positions& a, const Positions& b);
// [begin, end).
Positions span(int64_t begin, int64_t end);

}  // namespace deferkv::testing
