#include "press/methods/deferkv/temporal_fusion.h"

#include <cmath>

namespace deferkv {

TemporalFusion TemporalFusion::make(int64_t window, int64_t d, double eta, bool per_query, bool decode_feedback) {
  TemporalFusion f;
  f.window_weights.assign(static_cast<size_t>(window), 1.0f / static_cast<float>(window));
  if (!decode_feedback) {
    // F = S_P exactly as the base computes it, so the kept set equals the base's.
    if (per_query) {
      for (int64_t i = 0; i < window; ++i) f.window_weights[i] = static_cast<float>(std::pow(eta, window - 1 - i));
    }
    return f;
  }
  double z = 0;
  for (int64_t s = 1; s <= d; ++s) {
    f.decode_weights.push_back(static_cast<float>(std::pow(eta, d - s)));
    z += std::pow(eta, d - s);
  }
  for (int64_t i = 0; i < window; ++i) {
    const double w = per_query ? std::pow(eta, d + window - 1 - i) : std::pow(eta, d) / static_cast<double>(window);
    f.window_weights[i] = static_cast<float>(w);
    z += w;
  }
  f.normaliser = static_cast<float>(z);
  return f;
}

std::vector<float> TemporalFusion::fuse(const std::vector<float>& prompt,
                                        const std::vector<const std::vector<float>*>& decode, int64_t n) const {
  std::vector<float> f(prompt.begin(), prompt.begin() + n);
  for (size_t s = 0; s < decode_weights.size(); ++s) {
    for (int64_t j = 0; j < n; ++j) f[j] += decode_weights[s] * (*decode[s])[j];
  }
  for (float& x : f) x /= normaliser;
  return f;
}

}  // namespace deferkv
