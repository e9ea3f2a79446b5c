// SpecKV [docs/methods/speckv.md]: a small draft model of the same family continues the prompt
// by n_draft tokens; the model prefills prompt + draft, and the last w + 1 prompt
// queries together with the draft queries score the older prompt entries, by the max
// over the group's query heads and those queries; max-pooled, each KV head keeps its
// top b - w plus prompt tokens T-w-1 .. T-2. The draft entries and the prompt's last
// token are dropped, and the session feeds that token again (so b + 1 prompt entries
// remain). Needs Session::set_draft_model (--draft-model). The reference's sparse
// (vertical-slash) prefill for long inputs is an efficiency option not reproduced: the
// prefill here is dense.
#include <algorithm>

#include "deferkv/error.h"
#include "kv/kv_cache.h"
#include "press/core/attention_sums.h"
#include "press/core/pooling.h"
#include "press/registry.h"
#include "press/core/selection.h"

namespace deferkv {
namespace {

class SpecKvPress final : public Press {
 public:
  SpecKvPress(const PressParams& params, const KvBudget& budget, int64_t window, int64_t kernel, Pooling pooling,
              int64_t n_draft)
      : description_(params.describe()), budget_(budget), window_(window), kernel_(kernel), pooling_(pooling),
        n_draft_(n_draft) {
    if (!budget.is_ratio() && budget.resolve(0) < window) {
      fail("the KV budget of {} entries per head is smaller than the {} window entries of '{}'", budget.resolve(0),
           window, description_);
    }
  }

  std::string describe() const override { return description_; }
  void on_attach(const PressModelShape&, PressHost& host) override {
    host.use_draft_model();
    host_ = &host;
  }

  void on_prefill_begin(int64_t first_position, int64_t n_tokens) override {
    prompt_end_ = first_position + n_tokens;
    budget_entries_ = budget_.resolve(prompt_end_);
    scores_.clear();
    capturing_ = evicts();
  }

  void on_attention(const AttentionEvent& event) override {
    if (capturing_) observe(event);
  }

  // The draft continues the prompt and its queries join the observers; its entries, and
  // the prompt's last token, then go, and the session feeds that token again.
  void on_prefill_end(KvCache& cache) override {
    if (!capturing_) return;
    if (host_ == nullptr) fail("press '{}' drafts: use it on a session", description_);
    host_->run_after_prompt(host_->draft(n_draft_), [this](const AttentionEvent& event) { observe(event); });
    capturing_ = false;
    const int64_t candidates = prompt_end_ - window_ - 1;  // entries [0, T - w - 1)
    for (int64_t l = 0; l < cache.n_layer(); ++l) {
      for (int64_t g = 0; g < cache.n_head_kv(); ++g) {
        const std::vector<float>& s = scores_[static_cast<size_t>(l)][static_cast<size_t>(g)];
        std::vector<float> pooled =
            pool_scores(std::vector<float>(s.begin(), s.begin() + candidates), pooling_, kernel_);
        cache.retain(l, g, merge_indices(top_k(pooled, budget_entries_ - window_), index_range(candidates, prompt_end_ - 1)));
      }
    }
    scores_.clear();
    host_->refeed_last_token();
  }

 private:
  bool evicts() const { return prompt_end_ > budget_entries_ && prompt_end_ > window_ + 1; }

  void observe(const AttentionEvent& event) {
    // Observers: prompt queries from T - w - 1 on, and every draft query after them.
    const int64_t first = prompt_end_ - window_ - 1;
    const int64_t skip = std::clamp<int64_t>(first - event.positions[0], 0, event.n);
    if (skip == event.n) return;
    add_attention(event, skip, RowReduction::kMax, GroupReduction::kMax, scores_);
  }

  std::string description_;
  KvBudget budget_;
  int64_t window_, kernel_;
  Pooling pooling_;
  int64_t n_draft_;
  int64_t prompt_end_ = 0, budget_entries_ = 0;
  bool capturing_ = false;
  LayerAttention scores_;
  PressHost* host_ = nullptr;
};

}  // namespace

PressMethod speckv_method() {
  return {{"speckv", "a draft model's continuation joins the window; max-reduced SnapKV scoring (needs --draft-model)",
           "Draft-based Approximate Inference for LLMs, arXiv 2506.08373",
           {{"window", "32", "prompt queries observing with the draft (w + 1 of them)"},
            {"kernel", "7", "pooling kernel"},
            {"pooling", "max", "max | avg | none"},
            {"n_draft", "32", "tokens the draft model generates (the reference defaults to the task's answer length)"}}},
          [](const PressParams& p, const KvBudget& b) -> std::unique_ptr<Press> {
            return std::make_unique<SpecKvPress>(p, b, p.get_int("window", 0, 1 << 20), p.get_int("kernel", 1, 1023),
                                                 parse_pooling(p.get_choice("pooling", {"max", "avg", "none"})),
                                                 p.get_int("n_draft", 1, 4096));
          },
          [](const PressParams&) { return PressRole{true, false, "draft"}; }};
}

}  // namespace deferkv
