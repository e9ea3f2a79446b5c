// TOVA [docs/methods/tova.md]: the newest query's attention, averaged over every query
// head, ranks the entries; all KV heads keep the same b entries. At the end of the
// prefill the last prompt token's row cuts the cache to b; with per_step (the original
// method) every decode step then drops the entry its own query attends to least, so the
// cache stays at b entries per head, generated tokens included (every=n: every n-th
// step drops n entries, by that step's query). No window or sinks.
#include "press/core/scored_press.h"

#include "kernels/vec.h"

namespace deferkv {
namespace {

class TovaPress final : public ScoredPress {
 public:
  TovaPress(const PressParams& params, const KvBudget& budget) : ScoredPress(params, budget, parts(params)) {}

 protected:
  std::vector<std::vector<float>> score(const LayerEviction& layer) override {
    const int64_t heads = layer.n_head_kv();
    // Heads of different lengths (after a head-adaptive press in a composition) each rank
    // by their group's mean attention.
    for (int64_t g = 1; g < heads; ++g) {
      if (layer.candidates[g] != layer.candidates[0]) return layer.candidate_attention();
    }
    // Every KV head serves the same number of query heads, so the mean of the group
    // means is the mean over all query heads: one ranking for every KV head (summed, then
    // divided once, by vector passes: this runs at every decode step).
    const int64_t c = layer.candidates[0];
    const std::vector<float>& first = layer.prompt_attention[0];
    std::vector<float> mean(first.begin(), first.begin() + c);
    for (int64_t g = 1; g < heads; ++g) add_f32(layer.prompt_attention[static_cast<size_t>(g)].data(), mean.data(), c);
    divide_f32(mean.data(), static_cast<float>(heads), c);
    return std::vector<std::vector<float>>(static_cast<size_t>(heads), mean);
  }

 private:
  static ScoredParts parts(const PressParams& params) {
    ScoredParts p = read_scored_parts(params);
    // The last prompt query, then each evicting step's own query.
    p.capture.observations = {Observation::prompt_window(1), Observation::every(Observation::Queries::kTriggerStep)};
    return p;
  }
};

}  // namespace

PressMethod tova_method() {
  return {{"tova", "the newest query's head-averaged attention keeps b entries, shared by all KV heads",
           "TOVA, arXiv 2401.06104", with_shared_parameters({}, {.per_step = true})},
          [](const PressParams& p, const KvBudget& b) -> std::unique_ptr<Press> {
            return std::make_unique<TovaPress>(p, b);
          },
          position_matched_press_role};
}

}  // namespace deferkv
