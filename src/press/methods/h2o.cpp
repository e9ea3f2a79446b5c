// H2O, one-shot [methods.md §6.1] as the KV-compression papers run it: every prompt
// query's attention is summed per entry ("heavy hitters"; no normalisation by how many
// queries see an entry, hence a lean towards early tokens), no pooling; each KV head
// keeps its top b - w plus the last w prompt tokens.
#include "press/one_shot_press.h"
#include "press/registry.h"
#include "press/selection.h"

namespace deferkv {
namespace {

class H2oPress final : public OneShotPress {
 public:
  H2oPress(const PressParams& params, const KvBudget& budget, int64_t window)
      : OneShotPress(params, budget, window, 0, capture()) {}

 protected:
  std::vector<std::vector<int32_t>> choose(const LayerEviction& layer) override {
    std::vector<std::vector<int32_t>> keep(static_cast<size_t>(layer.n_head_kv()));
    for (int64_t g = 0; g < layer.n_head_kv(); ++g) {
      const auto& a = layer.prompt_attention[g];
      keep[g] = top_k(std::vector<float>(a.begin(), a.begin() + layer.candidates[g]), layer.candidate_budget());
    }
    return keep;
  }

 private:
  static CaptureConfig capture() {
    CaptureConfig c;
    c.all_prompt_queries = true;
    return c;
  }
};

}  // namespace

PressMethod h2o_method() {
  return {{"h2o", "heavy hitters: attention summed over every prompt query, top-k per KV head at prefill end",
           "H2O, arXiv 2306.14048",
           {{"window", "8", "recent prompt tokens always kept"}}},
          [](const PressParams& p, const KvBudget& b) -> std::unique_ptr<Press> {
            return std::make_unique<H2oPress>(p, b, p.get_int("window", 0, 1 << 20));
          }};
}

}  // namespace deferkv
