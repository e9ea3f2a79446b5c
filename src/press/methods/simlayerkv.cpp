// SimLayerKV [docs/methods/simlayerkv.md] (Zhang et al., arXiv 2410.13846; kvpress
// SimLayerKVPress): some layers are "lazy", their last queries attending almost only to the
// first tokens and the most recent ones; such a layer loses little by keeping just those
// (StreamingLLM), the others keep everything. Per layer, at the end of the prefill: the
// attention of the last n_last prompt queries over the entries before them, averaged over
// the queries and every query head, summed over the first n_initial and the last n_recent of
// those entries; above lazy_threshold the layer is lazy and each KV head keeps its first
// n_initial entries and its last n_recent - n_last. No budget: how much is evicted follows
// from the prompt.
#include <algorithm>

#include <spdlog/spdlog.h>

#include "deferkv/error.h"
#include "kv/kv_cache.h"
#include "observe/attention_tap.h"
#include "press/core/attention_sums.h"
#include "press/core/prompt_press.h"
#include "press/registry.h"

namespace deferkv {
namespace {

struct SimLayerKvParams {
  double lazy_threshold;
  int64_t n_last, n_recent, n_initial;
};

class SimLayerKvPress final : public PromptPress {
 public:
  SimLayerKvPress(const PressParams& params, const KvBudget& budget, const SimLayerKvParams& p)
      : PromptPress(params, budget), p_(p) {}

  void on_attach(const PressModelShape& shape, PressHost& host) override {
    PromptPress::on_attach(shape, host);
    // Every query head and every one of the n_last queries weighs the same: a layer's score
    // is the sum over its KV heads of these weighted sums.
    head_weights_.assign(static_cast<size_t>(shape.n_head),
                         1.0f / static_cast<float>(shape.n_head * p_.n_last));
  }

  // A layer's laziness needs only its own window attention, complete once the prompt has
  // passed it: it is decided and evicted at the layer's end.
  PressPoints points() const override { return PromptPress::points().with(PressPoint::kPromptLayerEnd); }
  // Any layer may turn out busy and keep its whole prompt: admission reserves it all.
  PressHolding holding(const PressModelShape&, int64_t prompt_tokens) const override { return {.kept = prompt_tokens}; }

  void act(const PressAt& at, KvCache& cache) override {
    PromptPress::act(at, cache);
    switch (at.point) {
      case PressPoint::kPromptBegin:
        attention_.clear();
        evicted_layers_ = 0;
        warned_ = false;
        return;
      case PressPoint::kPromptLayerEnd:
        evict_layer(cache, at.layer);
        if (at.layer == cache.n_layer() - 1) attention_.clear();
        return;
      default: return;
    }
  }

  void on_attention(const AttentionEvent& event) override {
    if (event.phase != PassPhase::kPrompt || event.positions[0] >= prompt_end()) return;
    const int64_t skip = std::clamp<int64_t>(prompt_end() - p_.n_last - event.positions[0], 0, event.n);
    if (skip == event.n || head_weights_.empty()) return;
    add_attention(event, skip, RowReduction::kWeightedSum, GroupReduction::kSum, attention_, head_weights_.data());
  }

 private:
  // The layer's score (kvpress's is_lazy): entries are a head's in cache order, the last
  // n_last of them the window's own, which the sum leaves out as kvpress does.
  double laziness(const KvCache& cache, int64_t l) const {
    double score = 0;
    const auto& heads = attention_[static_cast<size_t>(l)];
    for (int64_t g = 0; g < cache.n_head_kv(); ++g) {
      const std::vector<float>& a = heads[static_cast<size_t>(g)];
      const int64_t seen = std::min<int64_t>(static_cast<int64_t>(a.size()), cache.length(l, g)) - p_.n_last;
      for (int64_t j = 0; j < seen; ++j) {
        if (j < p_.n_initial || j >= seen - p_.n_recent) score += a[static_cast<size_t>(j)];
      }
    }
    return score;
  }

  void evict_layer(KvCache& cache, int64_t l) {
    if (l != evicted_layers_) fail("internal: '{}' evicts layer {} after {} layers", description(), l, evicted_layers_);
    ++evicted_layers_;
    // kvpress: a threshold of 1 never finds a lazy layer; nor is a prompt of at most
    // n_initial + n_recent + n_last entries compressed.
    if (p_.lazy_threshold >= 1.0 || static_cast<size_t>(l) >= attention_.size() || attention_[l].empty()) return;
    const int64_t min_length = p_.n_initial + p_.n_recent + p_.n_last;
    for (int64_t g = 0; g < cache.n_head_kv(); ++g) {
      if (cache.length(l, g) <= min_length) {
        if (!warned_) spdlog::warn("'{}': a head holds at most {} entries: no compression", description(), min_length);
        warned_ = true;
        return;
      }
    }
    if (laziness(cache, l) <= p_.lazy_threshold) return;
    // Lazy: the first n_initial and the last n_recent - n_last entries (kvpress's slices).
    for (int64_t g = 0; g < cache.n_head_kv(); ++g) {
      const int64_t end = cache.length(l, g) - (p_.n_recent - p_.n_last);
      std::vector<int32_t> dropped;
      for (int64_t j = p_.n_initial; j < end; ++j) dropped.push_back(static_cast<int32_t>(j));
      if (!dropped.empty()) cache.erase(l, g, dropped);
    }
  }

  SimLayerKvParams p_;
  std::vector<float> head_weights_;
  LayerAttention attention_;  // [layer][g][entry]: the window's mean attention, summed over g's heads
  int64_t evicted_layers_ = 0;
  bool warned_ = false;
};

}  // namespace

PressMethod simlayerkv_method() {
  return {{"simlayerkv",
           "lazy layers (last queries on the first and recent tokens) keep sinks + recent, the others all; no budget",
           "Zhang et al., SimLayerKV, arXiv 2410.13846; kvpress SimLayerKVPress",
           {{"lazy_threshold", "1.0",
             "a layer is lazy when its last queries' attention to the first and recent tokens exceeds this; 1 finds "
             "none (kvpress's default); kvpress recommends Llama3 0.9, Llama2 0.65, Mistral 0.8, Qwen 0.85"},
            {"n_last", "1", "last prompt queries whose attention decides"},
            {"n_recent", "1024", "recent tokens a lazy layer keeps (n_recent - n_last of them, as kvpress)"},
            {"n_initial", "4", "first tokens (sinks) a lazy layer keeps"}},
           false},
          [](const PressParams& p, const KvBudget& b) -> std::unique_ptr<Press> {
            const SimLayerKvParams params{p.get_double("lazy_threshold", 0.0, 1.0), p.get_int("n_last", 1, 1 << 20),
                                          p.get_int("n_recent", 1, 1 << 24), p.get_int("n_initial", 0, 1 << 24)};
            if (params.n_recent < params.n_last) {
              fail("press 'simlayerkv': n_recent={} must be at least n_last={} (a lazy layer keeps the last "
                   "n_recent - n_last entries)",
                   params.n_recent, params.n_last);
            }
            return std::make_unique<SimLayerKvPress>(p, b, params);
          }};
}

}  // namespace deferkv
