#pragma once
// One layer's estimate of how deleting cache entries changes the next-token
// distributions at the reference positions [docs/methods/behavior_preserving.md, steps 1-4], without a
// forward pass per candidate.
//
// For a reference position t and query head h (KV head g), with a_j the attention of t
// on entry j and o_h = sum_j a_j v_j, deleting a set M of g's entries renormalises the
// rest (step 1, exact):
//   o'_h = (o_h - U) / (1 - A),  do_h = (A o_h - U) / (1 - A),  A = sum_M a_j,  U = sum_M a_j v_j.
// The final residual moves by sum_h W_O^h do_h (pass-through, step 2) and the top-K
// logits by G_t W_O^h do_h (G_t = W_U[K] J_t, step 3). With Psi_h = G_t W_O^h (K x d) and
// the per-entry effect e_j = Psi_h (o_h - v_j) (K values), linearity gives
//   dz_t(M) = sum_h (sum_{j in M} a_j e_j) / (1 - A_h),
// so each candidate's e_j is computed once per head and reference (O(K d), a GEMM) and
// any set's logit change then costs O(K) per member and head.
#include <cstdint>
#include <vector>

#include "kernels/attention.h"
#include "press/methods/behavior_preserving/output_sensitivity.h"

namespace deferkv {

class ThreadPool;

// One reference position as one layer sees it.
struct LayerReference {
  int32_t position;                 // the query sees the entries at positions <= this
  const float* queries;             // [n_head * head_dim] of this layer, after RoPE
  const OutputSensitivity* output;  // every reference has the same K
};

class LayerDeletionModel {
 public:
  // (Re)builds the model of one layer. attention_output: the layer's W_O [n_embd x
  // n_head * head_dim]. candidates[g]: the entries of KV head g that may be deleted
  // (indices into the head's entries). One instance serves layer after layer, so the
  // large buffers (K values per candidate, head and reference) keep their pages rather
  // than fault fresh ones in for every layer (bench/README.md, Behavior-Preserving).
  void build(std::vector<LayerReference> references, const std::vector<float>& attention_output, int64_t n_embd,
             const AttentionShape& shape, const std::vector<KvHeadView>& kv, std::vector<std::vector<int32_t>> candidates,
             ThreadPool& pool);

  int64_t n_head_kv() const { return static_cast<int64_t>(candidates_.size()); }
  int64_t group() const { return group_; }  // query heads per KV head
  int64_t n_references() const { return static_cast<int64_t>(references_.size()); }
  int64_t top_k() const { return top_k_; }
  const TruncatedDistribution& distribution(int64_t r) const { return references_[r].output->distribution; }
  const std::vector<int32_t>& candidates(int64_t g) const { return candidates_[g]; }

  // For candidate c of KV head g (an index into candidates(g)), reference r and the
  // group's i-th query head: a_j, and e_j [K].
  float attention(int64_t g, int64_t c, int64_t r, int64_t i) const {
    return attention_[g][(c * n_references() + r) * group_ + i];
  }
  const float* effect(int64_t g, int64_t c, int64_t r, int64_t i) const {
    return effects_[g].data() + ((c * n_references() + r) * group_ + i) * top_k_;
  }

  // Candidates one task of the thread pool should take when each costs O(references x
  // group x K): fewer are not worth handing to another thread.
  int64_t candidates_per_task() const;

  // The second-order KL (output_kl.h) of deleting each candidate alone, mean over the
  // references: [g][c]. The pool of §10.2 step 5a is drawn from these.
  std::vector<std::vector<float>> singleton_scores(ThreadPool& pool) const;

 private:
  std::vector<LayerReference> references_;
  std::vector<std::vector<int32_t>> candidates_;
  int64_t group_ = 1, top_k_ = 0;
  std::vector<std::vector<float>> attention_;  // [g][c][r][i]
  std::vector<std::vector<float>> effects_;    // [g][c][r][i][K]
  std::vector<std::vector<float>> values_;     // [g][c]: the candidates' value rows
  std::vector<float> w_o_transposed_;
  std::vector<std::vector<float>> psi_;        // [r]: G W_O, K x (n_head * head_dim)
};

// A set of one layer's candidates to delete, grown by the greedy selection; its KL is
// the exact one over top-K + rest (output_kl.h), mean over the references.
class DeletionSet {
 public:
  explicit DeletionSet(const LayerDeletionModel& model);

  double kl() const;
  // The KL if candidate c of head g were deleted too (the set is unchanged); scratch is
  // resized to K. Safe to call from several threads with their own scratch.
  double kl_with(int64_t g, int64_t c, std::vector<float>& scratch) const;
  // Deletes the given (KV head, candidate) pairs.
  void add(const std::vector<std::pair<int64_t, int64_t>>& members);
  // dz_r [K] of the current set.
  const float* delta_z(int64_t r) const { return delta_z_.data() + r * model_.top_k(); }

 private:
  const LayerDeletionModel& model_;
  int64_t n_head_;
  std::vector<double> mass_;     // [r][h]: A
  std::vector<float> weighted_;  // [r][h][K]: sum over the deleted j of a_j e_j
  std::vector<float> delta_z_;   // [r][K]
};

}  // namespace deferkv
