// Moment-KV [docs/methods/moment_kv.md]: decode-time compression of the generated tokens only.
// Prompt entries are never evicted (compose with a prefill press to compress them, e.g.
// "snapkv+moment_kv"). Each generated entry carries an importance
//   I(t) = alpha * I(t - 1) + a(t),
// a(t) = the current query's attention on it averaged over the query heads (softmax
// over the whole cache; a new entry starts at 0). When more than decode_budget
// generated entries are held, the least important go, whatever their age.
// [OUR FORMULATION] one decision per layer from the mean over all query heads, shared by
// the KV heads (like TOVA); per_kv_head=true keeps one importance per KV head (mean over
// its group). alpha's default 0.9 is a placeholder: the paper's value is not known.
#include <algorithm>

#include "kv/kv_cache.h"
#include "observe/attention_observation.h"
#include "observe/attention_tap.h"
#include "press/core/prompt_press.h"
#include "press/core/selection.h"
#include "press/registry.h"

namespace deferkv {
namespace {

// The entries from decode_origin() on are the generated ones: the question (PromptPress's
// kQuestion moves the origin past it) is kept as the prompt is, and only the answer's
// tokens are ranked. Its budget is decode_budget, not the session's KV budget.
class MomentKvPress final : public PromptPress {
 public:
  MomentKvPress(const PressParams& params, int64_t decode_budget, double alpha, bool per_kv_head)
      : PromptPress(params, KvBudget()), decode_budget_(decode_budget), alpha_(static_cast<float>(alpha)),
        per_kv_head_(per_kv_head) {}

  // The prompt is never evicted; the generated entries after each decode step.
  PressPoints points() const override { return PromptPress::points().with(PressPoint::kDecodeStep); }
  void act(const PressAt& at, KvCache& cache) override {
    PromptPress::act(at, cache);
    if (at.point == PressPoint::kPromptBegin) importance_.clear();
    if (at.point == PressPoint::kDecodeStep) evict_generated(cache);
  }

  void on_attention(const AttentionEvent& event) override {
    if (event.positions[0] < decode_origin()) return;  // prompt or question rows: nothing to track yet
    // Only the generated entries' attention is read: the rest is neither zeroed nor reduced.
    first_generated_.resize(event.kv.size());
    attention_.resize(event.kv.size());
    for (size_t g = 0; g < event.kv.size(); ++g) {
      first_generated_[g] = generated_start(event.kv[g]);
      attention_[g].resize(static_cast<size_t>(event.kv[g].length));
      std::fill(attention_[g].begin() + first_generated_[g], attention_[g].end(), 0.0f);
    }
    ObservedQueries rows = observed_rows(event, event.n - 1, nullptr);
    rows.from = first_generated_.data();
    observe_attention(rows, event.shape, event.kv, RowReduction::kWeightedSum, GroupReduction::kMean, attention_,
                      event.pool);
    if (importance_.size() <= static_cast<size_t>(event.layer)) importance_.resize(static_cast<size_t>(event.layer) + 1);
    auto& layer = importance_[static_cast<size_t>(event.layer)];
    layer.resize(event.kv.size());
    for (size_t g = 0; g < event.kv.size(); ++g) {
      // The shared decision reads head 0's importance: make it the mean over all heads.
      const size_t target = per_kv_head_ ? g : 0;
      const KvHeadView& head = event.kv[g];
      const int64_t first_generated = first_generated_[g];
      std::vector<float>& importance = layer[target];
      importance.resize(static_cast<size_t>(head.length - first_generated), 0.0f);
      if (g == target) {
        for (float& x : importance) x *= alpha_;
      }
      const float share = per_kv_head_ ? 1.0f : 1.0f / static_cast<float>(event.kv.size());
      for (int64_t j = first_generated; j < head.length; ++j) {
        importance[static_cast<size_t>(j - first_generated)] += share * attention_[g][static_cast<size_t>(j)];
      }
    }
  }

  // Each (layer, KV head) keeps its decode_budget most important generated entries.
  void evict_generated(KvCache& cache) {
    for (int64_t l = 0; l < cache.n_layer() && static_cast<size_t>(l) < importance_.size(); ++l) {
      auto& layer = importance_[static_cast<size_t>(l)];
      for (int64_t g = 0; g < cache.n_head_kv(); ++g) {
        std::vector<float>& importance = layer[per_kv_head_ ? static_cast<size_t>(g) : 0];
        if (static_cast<int64_t>(importance.size()) <= decode_budget_) continue;
        const int64_t first_generated = cache.length(l, g) - static_cast<int64_t>(importance.size());
        const std::vector<int32_t> keep = top_k(importance, decode_budget_);
        // The generated entries not kept go; the prompt's are not touched (erase, not retain,
        // so the step costs the decode region, not the whole head; lazily, so their rows
        // move once every KvCache::kMaxHoles drops).
        std::vector<int32_t> dropped;
        for (size_t j = 0, k = 0; j < importance.size(); ++j) {
          if (k < keep.size() && keep[k] == static_cast<int32_t>(j)) {
            ++k;
          } else {
            dropped.push_back(static_cast<int32_t>(first_generated + static_cast<int64_t>(j)));
          }
        }
        cache.erase_lazily(l, g, dropped);
        if (per_kv_head_ || g == cache.n_head_kv() - 1) {
          std::vector<float> kept;
          for (int32_t j : keep) kept.push_back(importance[static_cast<size_t>(j)]);
          importance = std::move(kept);
        }
      }
    }
  }

 private:
  // Index of the head's first generated entry.
  int64_t generated_start(const KvHeadView& head) const {
    return entries_before(head.positions, head.length, decode_origin());
  }

  int64_t decode_budget_;
  float alpha_;
  bool per_kv_head_;
  std::vector<std::vector<std::vector<float>>> importance_;  // [layer][g or 0][generated entry]
  // Scratch of on_attention, kept between steps: per KV head the index of its first
  // generated entry, and the new query's attention over its entries.
  std::vector<int64_t> first_generated_;
  std::vector<std::vector<float>> attention_;
};

}  // namespace

PressMethod moment_kv_method() {
  return {{"moment_kv", "decode-time: generated tokens ranked by momentum-decayed attention, prompt kept",
           "Moment-KV, arXiv 2605.29873",
           {{"decode_budget", "512", "generated entries kept per KV head (B_d)"},
            {"alpha", "0.9", "momentum of the importance (placeholder: the paper's value is unknown)"},
            {"per_kv_head", "false", "one importance per KV head instead of one per layer"}},
           false},
          [](const PressParams& p, const KvBudget&) -> std::unique_ptr<Press> {
            return std::make_unique<MomentKvPress>(p, p.get_int("decode_budget", 1, 1 << 24),
                                                   p.get_double("alpha", 0.0, 1.0), p.get_bool("per_kv_head"));
          },
          [](const PressParams&) { return PressRole{false, true, ExtraForward::kNone, false, false}; }};
}

}  // namespace deferkv
