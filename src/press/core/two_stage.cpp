#include "press/core/two_stage.h"

#include <cmath>
#include <limits>

#include "kv/kv_cache.h"
#include "press/core/selection.h"

namespace deferkv {

std::vector<PressParameter> two_stage_parameters() {
  return {{"first_stage_ratio", "0.5", "share of each head's kept candidates chosen by the base score alone (stage 1)"},
          {"epsilon", "1e-4", "added to the base score before it is scaled by the projected value norm (stage 2)"}};
}

TwoStageSelection read_two_stage(const PressParams& params) {
  return {params.get_double("first_stage_ratio", 0.0, 1.0), params.get_double("epsilon", 0.0, 1e6)};
}

std::vector<float> projected_value_norms(const KvCache& cache, int64_t layer, int64_t g, int64_t candidates,
                                         const std::vector<float>& w_o, int64_t n_embd, int64_t n_head) {
  const int64_t d = cache.head_dim();
  const int64_t group = n_head / cache.n_head_kv();
  const int64_t q_dim = n_head * d;
  KvRowReader value(cache.values(layer, g));
  std::vector<float> norms(static_cast<size_t>(candidates));
  for (int64_t j = 0; j < candidates; ++j) {
    const float* v = value(j);
    double sum = 0;
    for (int64_t h = g * group; h < (g + 1) * group; ++h) {
      for (int64_t e = 0; e < n_embd; ++e) {
        const float* row = w_o.data() + e * q_dim + h * d;
        double dot = 0;
        for (int64_t i = 0; i < d; ++i) dot += double(row[i]) * v[i];
        sum += std::fabs(dot);
      }
    }
    norms[static_cast<size_t>(j)] = static_cast<float>(sum / static_cast<double>(group));
  }
  return norms;
}

void two_stage_rescore(std::span<float> scores, int64_t kept, std::span<const float> norms,
                       const TwoStageSelection& rule) {
  // Stage 1 by the base score (ties to the earlier entry, as every selection), before
  // stage 2 overwrites them.
  const auto first = top_k(scores, static_cast<int64_t>(std::floor(rule.first_stage_ratio * static_cast<double>(kept))));
  for (size_t j = 0; j < scores.size(); ++j) {
    scores[j] = static_cast<float>((double(scores[j]) + rule.epsilon) * norms[j]);
  }
  for (int32_t j : first) scores[static_cast<size_t>(j)] = std::numeric_limits<float>::max();
}

}  // namespace deferkv
