#pragma once
// How a reference position's next-token distribution responds to a change of its final
// residual [docs/methods/behavior_preserving.md, step 3]: the distribution p = softmax(W_U n(x)) truncated
// to its top K, and the first-order map from a residual change dr to the top-K logit
// change, dz = W_U[K] J dr, through the Jacobian of the final RMSNorm at x
//   J = diag(gamma) / rho (I - x x^T / (D rho^2)),  rho = sqrt(mean(x^2) + eps).
#include <cstdint>
#include <vector>

#include "press/methods/behavior_preserving/output_kl.h"

namespace deferkv {

class ModelReadout;

struct OutputSensitivity {
  TruncatedDistribution distribution;
  std::vector<float> logit_jacobian;  // [K x n_embd]: row k = W_U[token k] J
};

// Reads the LM head's K rows only (and the logits of x once).
OutputSensitivity output_sensitivity(const ModelReadout& readout, const float* residual, int64_t top_k);

}  // namespace deferkv
