#include "press/methods/behavior_preserving/output_sensitivity.h"

#include <cmath>

#include "deferkv/model_readout.h"
#include "kernels/vec.h"

namespace deferkv {

OutputSensitivity output_sensitivity(const ModelReadout& readout, const float* residual, int64_t top_k) {
  const int64_t dim = readout.n_embd();
  std::vector<float> logits(static_cast<size_t>(readout.n_vocab()));
  readout.logits(residual, logits.data());
  OutputSensitivity out{truncate_distribution(logits.data(), readout.n_vocab(), top_k), {}};
  const int64_t k = out.distribution.size();

  double sum_squares = 0;
  for (int64_t i = 0; i < dim; ++i) sum_squares += static_cast<double>(residual[i]) * residual[i];
  const double rho = std::sqrt(sum_squares / static_cast<double>(dim) + readout.final_norm_eps());
  std::vector<float> y(static_cast<size_t>(dim));  // x / rho
  for (int64_t i = 0; i < dim; ++i) y[i] = static_cast<float>(residual[i] / rho);

  // Row k: u_k - (u_k . y / D) y with u_k = W_U[k] * gamma / rho, which is W_U[k] J.
  out.logit_jacobian.resize(static_cast<size_t>(k * dim));
  readout.lm_head_rows(out.distribution.tokens.data(), k, out.logit_jacobian.data());
  const std::vector<float>& gamma = readout.final_norm_weight();
  for (int64_t r = 0; r < k; ++r) {
    float* u = out.logit_jacobian.data() + r * dim;
    for (int64_t i = 0; i < dim; ++i) u[i] = static_cast<float>(u[i] * gamma[i] / rho);
    axpy_f32(-dot_f32(u, y.data(), dim) / static_cast<float>(dim), y.data(), u, dim);
  }
  return out;
}

}  // namespace deferkv
