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

#include "kv/kv_cache.h"
#include "press/core/attention_sums.h"
#include "press/core/pooling.h"
#include "press/core/prompt_press.h"
#include "press/registry.h"

namespace deferkv {
namespace {

class SpecKvPress final : public PromptPress {
 public:
  SpecKvPress(const PressParams& params, const KvBudget& budget, int64_t window, int64_t kernel, Pooling pooling,
              int64_t n_draft)
      : PromptPress(params, budget, protected_window(window)), window_(window), kernel_(kernel), pooling_(pooling),
        n_draft_(n_draft) {}

  void on_attach(const PressModelShape& shape, PressHost& host) override {
    PromptPress::on_attach(shape, host);
    host.use_draft_model();
  }

  PressPoints points() const override { return PromptPress::points().with(PressPoint::kPromptEnd); }
  void act(const PressAt& at, KvCache& cache) override {
    PromptPress::act(at, cache);
    if (at.point == PressPoint::kPromptBegin) {
      scores_.clear();
      // The w + 1 observers end at the prompt's last token, which is dropped and fed again:
      // a prompt of w + 1 tokens or fewer has nothing older to score.
      capturing_ = prompt_outgrows(prompt_end(), budget_entries(), window_ + 1);
    }
    if (at.point == PressPoint::kPromptEnd) evict_with_draft(cache);
  }

  void on_attention(const AttentionEvent& event) override {
    if (capturing_) observe(event);
  }

  // The draft continues the prompt and its queries join the observers; its entries, and
  // the prompt's last token, then go, and the session feeds that token again.
  void evict_with_draft(KvCache& cache) {
    if (!capturing_) return;
    PressHost& session = host("drafts");
    session.run_after_prompt(session.draft(n_draft_), [this](const AttentionEvent& event) { observe(event); });
    capturing_ = false;
    const int64_t candidates = prompt_end() - window_ - 1;  // entries [0, T - w - 1)
    for (int64_t l = 0; l < cache.n_layer(); ++l) {
      for (int64_t g = 0; g < cache.n_head_kv(); ++g) {
        const std::vector<float>& s = scores_[static_cast<size_t>(l)][static_cast<size_t>(g)];
        std::vector<float> pooled =
            pool_scores(std::vector<float>(s.begin(), s.begin() + candidates), pooling_, kernel_);
        cache.retain(l, g, top_k_then_range(pooled, budget_entries() - window_, prompt_end() - 1));
      }
    }
    scores_.clear();
    session.refeed_last_token();
  }

 private:
  void observe(const AttentionEvent& event) {
    // Observers: prompt queries from T - w - 1 on, and every draft query after them.
    const int64_t first = prompt_end() - window_ - 1;
    const int64_t skip = std::clamp<int64_t>(first - event.positions[0], 0, event.n);
    if (skip == event.n) return;
    add_attention(event, skip, RowReduction::kMax, GroupReduction::kMax, scores_);
  }

  int64_t window_, kernel_;
  Pooling pooling_;
  int64_t n_draft_;
  bool capturing_ = false;
  LayerAttention scores_;
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
          [](const PressParams&) { return PressRole{true, false, ExtraForward::kDraft}; }};
}

}  // namespace deferkv
