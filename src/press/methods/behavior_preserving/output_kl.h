#pragma once
// The KL divergence between a reference position's next-token distribution p (full
// cache) and the distribution after its logits move by delta_z (compressed cache), over
// the K most probable tokens plus one "rest" bucket holding every other token
// [docs/methods/behavior_preserving.md, step 4]. The rest bucket's logit is held fixed (delta 0): only the
// K rows of the LM head are ever read. Both q and p are normalised over all V tokens:
//   q_k = p_k e^{dz_k} / Z (k in top-K),  q_rest = p_rest / Z,  Z = sum_K p_k e^{dz_k} + p_rest.
#include <cstdint>
#include <vector>

namespace deferkv {

struct TruncatedDistribution {
  std::vector<int32_t> tokens;  // the K most probable tokens, most probable first
  std::vector<float> p;         // their probabilities
  double p_rest = 0;            // 1 - sum(p): every other token

  int64_t size() const { return static_cast<int64_t>(tokens.size()); }
};

// softmax(logits) restricted to its k most probable tokens (ties: lower id first).
TruncatedDistribution truncate_distribution(const float* logits, int64_t n_vocab, int64_t k);

// KL(p || q) exactly, delta_z [K]: log(1 + sum_all p (e^u - 1 - u)) with u = dz - mean_p(dz)
// (the rest bucket's u = -mean), written so that small divergences keep their digits.
double truncated_kl(const TruncatedDistribution& dist, const float* delta_z);

// Its second-order expansion 1/2 dz^T (diag(p) - p p^T) dz = 1/2 Var_p(dz), the rest
// bucket's dz being 0.
double second_order_kl(const TruncatedDistribution& dist, const float* delta_z);

}  // namespace deferkv
