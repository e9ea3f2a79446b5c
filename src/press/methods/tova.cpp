// TOVA [docs/methods/tova.md]: the newest query's attention, averaged over every query
// head, ranks the entries; all KV heads keep the same b entries. At the end of the
// prefill the last prompt token's row cuts the cache to b; with per_step (the original
// method) every decode step then drops the entry its own query attends to least, so the
// cache stays at b entries per head, generated tokens included (every=n: every n-th
// step drops n entries, by that step's query). No window or sinks.
#include <algorithm>

#include "kernels/attention_observation.h"
#include "kernels/attention_tap.h"
#include "kv/kv_cache.h"
#include "press/registry.h"
#include "press/selection.h"

namespace deferkv {
namespace {

class TovaPress final : public Press {
  struct HeadScores {
    std::vector<int32_t> positions;  // of the head's entries when the scores were taken
    std::vector<float> scores;
  };

 public:
  TovaPress(const PressParams& params, const KvBudget& budget, bool per_step, int64_t every)
      : description_(params.describe()), budget_(budget), per_step_(per_step), every_(every) {}

  std::string describe() const override { return description_; }

  void on_prefill_begin(int64_t first_position, int64_t n_tokens) override {
    prompt_end_ = first_position + n_tokens;
    decode_origin_ = prompt_end_;
    budget_entries_ = budget_.resolve(prompt_end_);
    scores_.clear();
  }
  // The question's rows are not observed; decode steps count from its end.
  void on_question(int64_t first_position, int64_t n_tokens) override { decode_origin_ = first_position + n_tokens; }

  void on_attention(const AttentionEvent& event) override {
    const int64_t last = event.positions[event.n - 1];
    const bool wanted = last == prompt_end_ - 1 || (last >= decode_origin_ && evicts_at(last - decode_origin_ + 1));
    if (!wanted) return;
    std::vector<std::vector<float>> per_head(event.kv.size());
    for (size_t g = 0; g < per_head.size(); ++g) per_head[g].assign(static_cast<size_t>(event.kv[g].length), 0.0f);
    const int64_t stride = event.shape.n_head * event.shape.head_dim;
    const ObservedQueries query{event.queries + (event.n - 1) * stride, stride, event.positions + event.n - 1,
                                nullptr, 1};
    observe_attention(query, event.shape, event.kv, RowReduction::kWeightedSum, GroupReduction::kMean, per_head,
                      event.pool);
    if (scores_.size() <= static_cast<size_t>(event.layer)) scores_.resize(static_cast<size_t>(event.layer) + 1);
    auto& layer = scores_[static_cast<size_t>(event.layer)];
    layer.clear();
    for (size_t g = 0; g < per_head.size(); ++g) {
      const KvHeadView& kv = event.kv[g];
      layer.push_back({std::vector<int32_t>(kv.positions, kv.positions + kv.length), std::move(per_head[g])});
    }
  }

  void on_prefill_end(KvCache& cache) override { evict(cache); }
  void on_decode_step(KvCache& cache, int64_t step) override {
    if (evicts_at(step)) evict(cache);
  }

 private:
  bool evicts_at(int64_t step) const { return per_step_ && step % every_ == 0; }

  // Scores of a head's current entries. Another press of a composition may have evicted
  // some entries since the capture, so they are matched by position.
  static std::vector<float> current_scores(const HeadScores& captured, const KvCache& cache, int64_t l, int64_t g) {
    const int32_t* positions = cache.positions(l, g);
    std::vector<float> out;
    size_t i = 0;
    for (int64_t j = 0; j < cache.length(l, g); ++j) {
      while (i < captured.positions.size() && captured.positions[i] < positions[j]) ++i;
      out.push_back(i < captured.positions.size() && captured.positions[i] == positions[j] ? captured.scores[i] : 0.0f);
    }
    return out;
  }

  void evict(KvCache& cache) {
    for (int64_t l = 0; l < cache.n_layer() && static_cast<size_t>(l) < scores_.size(); ++l) {
      std::vector<std::vector<float>> heads;
      for (int64_t g = 0; g < cache.n_head_kv(); ++g) {
        heads.push_back(current_scores(scores_[static_cast<size_t>(l)][static_cast<size_t>(g)], cache, l, g));
      }
      const bool aligned = std::all_of(heads.begin(), heads.end(), [&](const auto& h) { return h.size() == heads[0].size(); });
      if (aligned) {
        // Every KV head serves the same number of query heads, so the mean of the group
        // means is the mean over all query heads: one choice for every KV head.
        if (static_cast<int64_t>(heads[0].size()) <= budget_entries_) continue;
        std::vector<float> mean(heads[0].size(), 0.0f);
        for (const auto& h : heads) {
          for (size_t j = 0; j < mean.size(); ++j) mean[j] += h[j] / static_cast<float>(heads.size());
        }
        const std::vector<int32_t> keep = top_k(mean, budget_entries_);
        for (int64_t g = 0; g < cache.n_head_kv(); ++g) cache.retain(l, g, keep);
        continue;
      }
      // Heads of different lengths (after a head-adaptive press in a composition): each
      // keeps its own best entries by its group's mean attention.
      for (int64_t g = 0; g < cache.n_head_kv(); ++g) {
        const std::vector<float>& h = heads[static_cast<size_t>(g)];
        if (static_cast<int64_t>(h.size()) > budget_entries_) cache.retain(l, g, top_k(h, budget_entries_));
      }
    }
    scores_.clear();
  }

  std::string description_;
  KvBudget budget_;
  bool per_step_;
  int64_t every_;
  int64_t prompt_end_ = 0;
  int64_t decode_origin_ = 0;  // the position of decode step 1's token
  int64_t budget_entries_ = 0;
  std::vector<std::vector<HeadScores>> scores_;  // [layer][g]: the newest observed query's attention
};

}  // namespace

PressMethod tova_method() {
  return {{"tova", "the newest query's head-averaged attention keeps b entries, shared by all KV heads",
           "TOVA, arXiv 2401.06104",
           {{"per_step", "true", "also evict one entry per decode step (the original); false: at prefill end only"},
            {"every", "1", "per_step: evict every n-th decode step"}}},
          [](const PressParams& p, const KvBudget& b) -> std::unique_ptr<Press> {
            return std::make_unique<TovaPress>(p, b, p.get_bool("per_step"), p.get_int("every", 1, 1 << 20));
          },
          [](const PressParams& p) {
            const bool per_step = p.get_bool("per_step");
            return PressRole{true, per_step, "", true, !per_step};
          }};
}

}  // namespace deferkv
