// KeyDiff [docs/methods/keydiff.md]: keys that point away from the head's average key
// direction draw attention, so each KV head keeps the b entries whose keys are least
// similar, by cosine, to the mean of its unit-normalised keys. Like KNorm it reads no
// attention; kvpress's KeyDiffPress scores the same way (no window, every layer).
#include <algorithm>
#include <cmath>

#include "kv/kv_cache.h"
#include "press/core/scored_press.h"

namespace deferkv {
namespace {

// Below this a norm counts as zero (torch's cosine_similarity clamps at the same eps), so
// an all-zero key or a zero anchor scores 0 rather than NaN.
constexpr double kNormEps = 1e-8;

class KeyDiffPress final : public ScoredPress {
 public:
  using ScoredPress::ScoredPress;

 protected:
  // -cos(k_j, a) with a the mean of k_i / ||k_i|| over every entry the head holds (the
  // window and any generated entries too: kvpress averages all the keys it is given).
  std::vector<std::vector<float>> score(const LayerEviction& layer) override {
    std::vector<std::vector<float>> scores(static_cast<size_t>(layer.n_head_kv()));
    const int64_t d = layer.cache.head_dim();
    for (int64_t g = 0; g < layer.n_head_kv(); ++g) {
      KvRowReader key(layer.cache.keys(layer.layer, g));
      const int64_t held = layer.cache.length(layer.layer, g);
      std::vector<double> anchor(static_cast<size_t>(d), 0.0);
      for (int64_t j = 0; j < held; ++j) {
        const float* k = key(j);
        const double inv = 1.0 / std::max(norm(k, d), kNormEps);
        for (int64_t i = 0; i < d; ++i) anchor[i] += k[i] * inv;
      }
      for (double& a : anchor) a /= static_cast<double>(std::max<int64_t>(held, 1));
      double anchor_norm = 0;
      for (double a : anchor) anchor_norm += a * a;
      anchor_norm = std::sqrt(anchor_norm);
      for (int64_t j = 0; j < layer.candidates[g]; ++j) {
        const float* k = key(j);
        double dot = 0;
        for (int64_t i = 0; i < d; ++i) dot += k[i] * anchor[i];
        scores[g].push_back(-static_cast<float>(dot / std::max(norm(k, d) * anchor_norm, kNormEps)));
      }
    }
    return scores;
  }

 private:
  static double norm(const float* k, int64_t d) {
    double sum = 0;
    for (int64_t i = 0; i < d; ++i) sum += double(k[i]) * k[i];
    return std::sqrt(sum);
  }
};

}  // namespace

PressMethod keydiff_method() {
  return {{"keydiff", "keep the keys least similar (cosine) to the head's mean key direction, per KV head, at prefill end",
           "Park et al., arXiv 2504.15364", with_shared_parameters({}, {.pieces = true})},
          [](const PressParams& p, const KvBudget& b) -> std::unique_ptr<Press> {
            return std::make_unique<KeyDiffPress>(p, b, read_scored_parts(p));
          },
          scored_press_role};
}

}  // namespace deferkv
