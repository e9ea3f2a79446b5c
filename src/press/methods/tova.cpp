// TOVA [methods.md §6.3]: the newest query's attention, averaged over every query
// head, ranks the entries; all KV heads keep the same b entries. At the end of the
// prefill the last prompt token's row cuts the cache to b; with per_step (the original
// method) every decode step then drops the entry its own query attends to least, so the
// cache stays at b entries per head, generated tokens included (every=n: every n-th
// step drops n entries, by that step's query). No window or sinks.
#include <algorithm>

#include "deferkv/error.h"
#include "kernels/attention_observation.h"
#include "kernels/attention_tap.h"
#include "kv/kv_cache.h"
#include "press/registry.h"
#include "press/selection.h"

namespace deferkv {
namespace {

class TovaPress final : public Press {
 public:
  TovaPress(const PressParams& params, const KvBudget& budget, bool per_step, int64_t every)
      : description_(params.describe()), budget_(budget), per_step_(per_step), every_(every) {}

  std::string describe() const override { return description_; }

  void on_prefill_begin(int64_t first_position, int64_t n_tokens) override {
    prompt_end_ = first_position + n_tokens;
    budget_entries_ = budget_.resolve(prompt_end_);
    scores_.clear();
  }

  void on_attention(const AttentionEvent& event) override {
    const int64_t last = event.positions[event.n - 1];
    const bool wanted = last == prompt_end_ - 1 || (last >= prompt_end_ && evicts_at(last - prompt_end_ + 1));
    if (!wanted) return;
    std::vector<std::vector<float>> per_head(event.kv.size());
    for (size_t g = 0; g < per_head.size(); ++g) per_head[g].assign(static_cast<size_t>(event.kv[g].length), 0.0f);
    const int64_t stride = event.shape.n_head * event.shape.head_dim;
    const float weight = 1.0f;
    const ObservedQueries query{event.queries + (event.n - 1) * stride, stride, event.positions + event.n - 1,
                                &weight, 1};
    observe_attention(query, event.shape, event.kv, RowReduction::kWeightedSum, GroupReduction::kMean, per_head,
                      event.pool);
    // Every KV head serves the same number of query heads, so the mean of the group
    // means is the mean over all query heads.
    std::vector<float> mean(per_head[0].size(), 0.0f);
    for (const auto& h : per_head) {
      if (h.size() != mean.size()) fail("internal: tova needs KV heads of equal length");
      for (size_t j = 0; j < mean.size(); ++j) mean[j] += h[j] / static_cast<float>(per_head.size());
    }
    if (scores_.size() <= static_cast<size_t>(event.layer)) scores_.resize(static_cast<size_t>(event.layer) + 1);
    scores_[static_cast<size_t>(event.layer)] = std::move(mean);
  }

  void on_prefill_end(KvCache& cache) override { evict(cache); }
  void on_decode_step(KvCache& cache, int64_t step) override {
    if (evicts_at(step)) evict(cache);
  }

 private:
  bool evicts_at(int64_t step) const { return per_step_ && step % every_ == 0; }

  void evict(KvCache& cache) {
    for (int64_t l = 0; l < cache.n_layer() && static_cast<size_t>(l) < scores_.size(); ++l) {
      const std::vector<float>& score = scores_[static_cast<size_t>(l)];
      if (static_cast<int64_t>(score.size()) <= budget_entries_) continue;
      const std::vector<int32_t> keep = top_k(score, budget_entries_);
      for (int64_t g = 0; g < cache.n_head_kv(); ++g) cache.retain(l, g, keep);
    }
    scores_.clear();
  }

  std::string description_;
  KvBudget budget_;
  bool per_step_;
  int64_t every_;
  int64_t prompt_end_ = 0;
  int64_t budget_entries_ = 0;
  std::vector<std::vector<float>> scores_;  // [layer][entry] of the newest observed query
};

}  // namespace

PressMethod tova_method() {
  return {{"tova", "the newest query's head-averaged attention keeps b entries, shared by all KV heads",
           "TOVA, arXiv 2401.06104",
           {{"per_step", "true", "also evict one entry per decode step (the original); false: at prefill end only"},
            {"every", "1", "per_step: evict every n-th decode step"}}},
          [](const PressParams& p, const KvBudget& b) -> std::unique_ptr<Press> {
            return std::make_unique<TovaPress>(p, b, p.get_bool("per_step"), p.get_int("every", 1, 1 << 20));
          }};
}

}  // namespace deferkv
