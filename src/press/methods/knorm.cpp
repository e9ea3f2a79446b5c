// KNorm [docs/methods/knorm.md]: keys with a small L2 norm draw attention, so each KV head
// keeps the b entries with the smallest key norms. No window; layers below skip_layers
// are left whole (KVCache-Factory skips layers 0 and 1; kvpress skips none).
#include <cmath>

#include "kv/kv_cache.h"
#include "press/one_shot_press.h"
#include "press/registry.h"
#include "press/selection.h"

namespace deferkv {
namespace {

class KnormPress final : public OneShotPress {
 public:
  KnormPress(const PressParams& params, const KvBudget& budget, int64_t skip_layers)
      : OneShotPress(params, budget, 0, 0, {}), skip_layers_(skip_layers) {}

 protected:
  std::vector<std::vector<int32_t>> choose(const LayerEviction& layer) override {
    std::vector<std::vector<int32_t>> keep(static_cast<size_t>(layer.n_head_kv()));
    const int64_t d = layer.cache.head_dim();
    for (int64_t g = 0; g < layer.n_head_kv(); ++g) {
      const int64_t c = layer.candidates[g];
      if (layer.layer < skip_layers_) {
        keep[g] = index_range(0, c);
        continue;
      }
      std::vector<float> score(static_cast<size_t>(c));
      KvRowReader key(layer.cache.keys(layer.layer, g));  // the stored keys, as float32
      for (int64_t j = 0; j < c; ++j) {
        const float* k = key(j);
        double sum = 0;
        for (int64_t i = 0; i < d; ++i) sum += double(k[i]) * k[i];
        score[j] = -static_cast<float>(std::sqrt(sum));
      }
      keep[g] = top_k(score, layer.budget);
    }
    return keep;
  }

 private:
  int64_t skip_layers_;
};

}  // namespace

PressMethod knorm_method() {
  return {{"knorm", "keep the keys with the smallest L2 norm, per KV head, at prefill end",
           "Devoto et al., arXiv 2406.11430",
           {{"skip_layers", "0", "layers below this index are not compressed"}}},
          [](const PressParams& p, const KvBudget& b) -> std::unique_ptr<Press> {
            return std::make_unique<KnormPress>(p, b, p.get_int("skip_layers", 0, 1 << 20));
          }};
}

}  // namespace deferkv
