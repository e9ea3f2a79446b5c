// KNorm [docs/methods/knorm.md]: keys with a small L2 norm draw attention, so each KV head
// keeps the b entries with the smallest key norms. No window; layers below skip_layers
// are left whole (KVCache-Factory skips layers 0 and 1; kvpress skips none).
#include <cmath>

#include "kv/kv_cache.h"
#include "press/core/scored_press.h"

namespace deferkv {
namespace {

class KnormPress final : public ScoredPress {
 public:
  using ScoredPress::ScoredPress;

 protected:
  // -||k_j|| of the stored keys (as float32).
  std::vector<std::vector<float>> score(const LayerEviction& layer) override {
    std::vector<std::vector<float>> scores(static_cast<size_t>(layer.n_head_kv()));
    const int64_t d = layer.cache.head_dim();
    for (int64_t g = 0; g < layer.n_head_kv(); ++g) {
      KvRowReader key(layer.cache.keys(layer.layer, g));
      for (int64_t j = 0; j < layer.candidates[g]; ++j) {
        const float* k = key(j);
        double sum = 0;
        for (int64_t i = 0; i < d; ++i) sum += double(k[i]) * k[i];
        scores[g].push_back(-static_cast<float>(std::sqrt(sum)));
      }
    }
    return scores;
  }
};

}  // namespace

PressMethod knorm_method() {
  return {{"knorm", "keep the keys with the smallest L2 norm, per KV head, at prefill end",
           "Devoto et al., arXiv 2406.11430",
           with_shared_parameters({{"skip_layers", "0", "layers below this index are not compressed"}}, {.pieces = true})},
          [](const PressParams& p, const KvBudget& b) -> std::unique_ptr<Press> {
            ScoredParts parts = read_scored_parts(p);
            parts.allocation.skip_layers = p.get_int("skip_layers", 0, 1 << 20);
            return std::make_unique<KnormPress>(p, b, std::move(parts));
          },
          scored_press_role};
}

}  // namespace deferkv
