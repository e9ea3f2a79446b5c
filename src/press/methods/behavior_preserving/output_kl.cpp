#include "press/methods/behavior_preserving/output_kl.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "kernels/vec.h"

namespace deferkv {

TruncatedDistribution truncate_distribution(const float* logits, int64_t n_vocab, int64_t k) {
  k = std::clamp<int64_t>(k, 1, n_vocab);
  std::vector<int32_t> order(static_cast<size_t>(n_vocab));
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  });
  const float max = logits[order[0]];
  double total = 0;
  for (int64_t v = 0; v < n_vocab; ++v) total += std::exp(static_cast<double>(logits[v]) - max);
  TruncatedDistribution out;
  double kept = 0;
  for (int64_t i = 0; i < k; ++i) {
    const double p = std::exp(static_cast<double>(logits[order[i]]) - max) / total;
    out.tokens.push_back(order[i]);
    out.p.push_back(static_cast<float>(p));
    kept += out.p.back();  // as stored, so that p and p_rest sum to 1
  }
  out.p_rest = std::max(0.0, 1.0 - kept);
  return out;
}

double truncated_kl(const TruncatedDistribution& dist, const float* delta_z) {
  const double mean = dot_f32(dist.p.data(), delta_z, dist.size());
  const double rest = dist.p_rest * (std::expm1(-mean) + mean);  // the rest bucket: u = -mean
  return std::log1p(weighted_expm1_excess_f32(dist.p.data(), delta_z, static_cast<float>(mean), dist.size()) + rest);
}

double second_order_kl(const TruncatedDistribution& dist, const float* delta_z) {
  const double mean = dot_f32(dist.p.data(), delta_z, dist.size());
  double variance = dist.p_rest * mean * mean;
  for (int64_t k = 0; k < dist.size(); ++k) {
    const double u = delta_z[k] - mean;
    variance += dist.p[k] * u * u;
  }
  return 0.5 * variance;
}

}  // namespace deferkv
