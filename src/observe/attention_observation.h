#pragma once
// Attention probabilities of chosen queries, reduced over queries and over each GQA
// group, for every entry of every KV head: what the eviction methods score with.
//
// P_i^h(j) = exp(scale q_i^h . k_j - LSE_i^h), the softmax over every entry query i can
// see (position <= its own). For several queries the probabilities are streamed in column
// blocks (a first pass finds each row's log-sum-exp, a second accumulates exp(s - LSE)
// per column), so no [queries x entries] matrix is held; work is split over (KV head,
// column block). One query (a decode step, the last prompt query) takes each head's
// whole row at once, as the decode attention does (softmax_f32 of the scaled scores), so
// the attention's own probabilities can serve instead; work is split over KV heads.
// Either way every output element is written by one thread, in a fixed order
// (deterministic).
#include <cstdint>
#include <vector>

#include "kernels/attention.h"
#include "observe/attention_tap.h"

namespace deferkv {

class ThreadPool;

enum class RowReduction { kWeightedSum, kMax };   // over the observed queries
enum class GroupReduction { kMean, kSum, kMax };  // over a KV head's query heads

struct ObservedQueries {
  const float* queries;      // row i at queries + i * stride: [n_head * head_dim], after RoPE
  int64_t stride;
  const int32_t* positions;  // [m]: query i sees the entries whose position <= positions[i]
  const float* weights;      // [m] row weights for kWeightedSum; nullptr: all 1
  int64_t m;
  const float* head_weights = nullptr;  // [n_head] weight of each query head in the group
                                        // reduction (0 leaves a head out); nullptr: all 1
  // For one query (m == 1) whose probabilities the attention kept
  // (AttentionEvent::probabilities): read instead of computed again. They are the same
  // floats the one-query path computes (same kernels, same key tiles, same scaling, same
  // softmax), so the result is identical, only cheaper.
  const std::vector<std::vector<float>>* probabilities = nullptr;
  // [n_head_kv] or nullptr: only the entries j >= from[g] of head g are wanted; out[g][j]
  // below may be left as it was or accumulated into. The probabilities are still normalised
  // over every visible entry, but the second pass skips the column blocks before from[g].
  const int64_t* from = nullptr;
};

// The event's rows from `skip` on, with `weights` (see ObservedQueries), and the attention's
// kept probabilities when those rows are the decode step's one query.
ObservedQueries observed_rows(const AttentionEvent& event, int64_t skip, const float* weights);

// out[g] must hold at least kv[g].length values. Accumulates, for each entry j of KV
// head g, group-reduce over the query heads h of g of row-reduce over i of P_i^h(j):
// added to out[g][j] for kWeightedSum, max-ed into it for kMax. Entries a query cannot
// see count as probability 0.
void observe_attention(const ObservedQueries& queries, const AttentionShape& shape,
                       const std::vector<KvHeadView>& kv, RowReduction rows, GroupReduction group,
                       std::vector<std::vector<float>>& out, ThreadPool& pool);

}  // namespace deferkv
