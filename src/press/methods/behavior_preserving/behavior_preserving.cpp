// Behavior-Preserving KV cache compression [docs/methods/behavior_preserving.md]: keep the entries whose
// deletion would change the model's next-token distribution most. The KL between the
// full-cache distribution and the compressed-cache one at the reference positions (the
// newest `queries` positions) is estimated from the forward pass's own statistics: a
// deletion's exact effect on each head's output, carried to the final residual unchanged
// (pass-through), through the final RMSNorm's Jacobian and the LM head's top-K rows
// (layer_deletion_model.h). Per layer, the cheapest singletons form a pool from which a
// greedy on the exact marginal KL deletes a block at a time until every KV head holds b
// entries (flexible: the layer G*b) (kl_greedy_selection.h).
// [OUR FORMULATION] choices: the first `sinks` positions and the newest `window` are
// never deleted; layers are scored independently (each against the full cache); per step
// (the shared trigger, every=N) the cache is cut back to b entries per head, generated
// ones included, every N decode steps, the newest positions being the references.
#include <algorithm>

#include "deferkv/error.h"
#include "deferkv/model_readout.h"
#include "kv/kv_cache.h"
#include "observe/attention_tap.h"
#include "press/core/prompt_press.h"
#include "press/core/trigger.h"
#include "press/methods/behavior_preserving/kl_greedy_selection.h"
#include "press/methods/behavior_preserving/reference_capture.h"
#include "press/registry.h"

namespace deferkv {
namespace {

struct Settings {
  int64_t window, sinks, queries, top_k;
  KlGreedyOptions greedy;
  Trigger trigger;  // at the end of the prefill, then per step if asked
};

class BehaviorPreservingPress final : public PromptPress {
 public:
  BehaviorPreservingPress(const PressParams& params, const KvBudget& budget, const Settings& settings)
      : PromptPress(params, budget,
                    {settings.window + settings.sinks,
                     fmt::format("protected entries (window={} + sinks={})", settings.window, settings.sinks),
                     "the window or the sinks (window=N, sinks=N in the press's parameters)"}),
        settings_(settings), capture_(settings.queries) {}

  void on_attach(const PressModelShape& shape, PressHost& host) override {
    PromptPress::on_attach(shape, host);
    readout_ = &host.read_model_output([this](const ResidualEvent& event) { capture_.add_residuals(event); });
  }

  void on_attention(const AttentionEvent& event) override {
    capture_.add_queries(event);
    shape_ = event.shape;
    pool_ = &event.pool;  // the session's, alive as long as the press is set on it
  }
  // Its greedy reads every layer's references at once: at the prompt's end, and per step
  // after the steps where the trigger fires.
  PressPoints points() const override {
    const PressPoints points = PromptPress::points().with(PressPoint::kPromptEnd);
    return settings_.trigger.per_step() ? points.with(PressPoint::kDecodeStep) : points;
  }
  // Steps count from decode_origin(): after a question, whose entries are cut like
  // generated ones.
  void act(const PressAt& at, KvCache& cache) override {
    PromptPress::act(at, cache);
    if (at.point == PressPoint::kPromptEnd) compress(cache, prompt_end());
    if (at.point == PressPoint::kDecodeStep && settings_.trigger.fires_after(at.step)) {
      compress(cache, decode_origin() + at.step);
    }
  }

 private:
  // What one layer must lose: per KV head the entries that may go and how many entries
  // it holds over the budget (negative: under).
  struct LayerQuota {
    std::vector<std::vector<int32_t>> candidates;
    std::vector<int64_t> over_budget;
    bool any = false;  // something is over budget and deletable
  };

  // Cuts every (layer, KV head) back to the budget; `end` is the position after the newest.
  void compress(KvCache& cache, int64_t end) {
    if (prompt_end() == 0) return;  // no prefill seen: no budget resolved
    std::vector<const ReferencePosition*> references;
    std::vector<OutputSensitivity> outputs;
    for (int64_t l = 0; l < cache.n_layer(); ++l) {
      const LayerQuota quota = layer_quota(cache, l, end);
      if (!quota.any) continue;
      if (outputs.empty()) {  // the first layer with something to delete
        host("reads the model's output");  // readout_ comes with the session's host
        references = capture_.complete(cache.n_layer());
        if (references.empty()) fail("internal: '{}' has no reference position captured", description());
        for (const ReferencePosition* ref : references) {
          outputs.push_back(output_sensitivity(*readout_, ref->residual.data(), settings_.top_k));
        }
      }
      std::vector<LayerReference> layer_references;
      for (size_t r = 0; r < references.size(); ++r) {
        layer_references.push_back({references[r]->position, references[r]->queries[l].data(), &outputs[r]});
      }
      delete_entries(cache, l, quota.candidates, choose(cache, l, quota, std::move(layer_references)));
    }
  }

  LayerQuota layer_quota(const KvCache& cache, int64_t l, int64_t end) const {
    LayerQuota out;
    int64_t over_budget = 0, deletable = 0;
    for (int64_t g = 0; g < cache.n_head_kv(); ++g) {
      out.over_budget.push_back(cache.length(l, g) - budget_entries());
      out.candidates.emplace_back();
      if (out.over_budget.back() <= 0 && !settings_.greedy.flexible) continue;
      const int32_t* positions = cache.positions(l, g);
      for (int64_t j = 0; j < cache.length(l, g); ++j) {
        if (positions[j] >= settings_.sinks && positions[j] < end - settings_.window) {
          out.candidates[g].push_back(static_cast<int32_t>(j));
        }
      }
      over_budget += settings_.greedy.flexible ? out.over_budget.back() : std::max<int64_t>(0, out.over_budget.back());
      deletable += static_cast<int64_t>(out.candidates[g].size());
    }
    out.any = over_budget > 0 && deletable > 0;
    return out;
  }

  // Per KV head, the deleted candidates (indices into quota.candidates[g]).
  std::vector<std::vector<int32_t>> choose(const KvCache& cache, int64_t l, const LayerQuota& quota,
                                           std::vector<LayerReference> references) {
    attention_output_.resize(static_cast<size_t>(readout_->n_embd() * shape_.n_head * shape_.head_dim));
    readout_->attention_output(l, attention_output_.data());
    std::vector<KvHeadView> kv;
    for (int64_t g = 0; g < cache.n_head_kv(); ++g) {
      kv.push_back(cache.view(l, g));
    }
    model_.build(std::move(references), attention_output_, readout_->n_embd(), shape_, kv, quota.candidates, *pool_);
    return choose_deletions(model_, quota.over_budget, settings_.greedy, *pool_);
  }

  static void delete_entries(KvCache& cache, int64_t l, const std::vector<std::vector<int32_t>>& candidates,
                             const std::vector<std::vector<int32_t>>& deleted) {
    for (int64_t g = 0; g < cache.n_head_kv(); ++g) {
      if (deleted[g].empty()) continue;
      std::vector<bool> gone(static_cast<size_t>(cache.length(l, g)), false);
      for (int32_t c : deleted[g]) gone[candidates[g][c]] = true;
      std::vector<int32_t> keep;
      for (int64_t j = 0; j < cache.length(l, g); ++j) {
        if (!gone[j]) keep.push_back(static_cast<int32_t>(j));
      }
      cache.retain(l, g, keep);
    }
  }

  Settings settings_;
  ReferenceCapture capture_;
  LayerDeletionModel model_;  // rebuilt for each layer, its buffers reused
  std::vector<float> attention_output_;  // the layer's W_O
  const ModelReadout* readout_ = nullptr;
  AttentionShape shape_{};
  ThreadPool* pool_ = nullptr;
};

}  // namespace

PressMethod behavior_preserving_method() {
  std::vector<PressParameter> params = {
      {"queries", "1", "reference positions: the newest m read (the prompt's tail; the latest generated tokens)"},
      {"top_k", "256", "vocabulary tokens scored one by one (the rest form one bucket whose logit is held fixed)"},
      {"pool", "2", "candidate pool per KV head (flexible: per layer) = pool x the entries to delete"},
      {"block", "64", "most entries a KV head deletes per greedy iteration (flexible: block x KV heads per layer)"},
      {"min_steps", "64", "at least this many greedy iterations per layer where the quota allows (the block shrinks to ceil(quota / min_steps))"},
      {"window", "32", "newest positions never deleted (the prompt's last w at prefill end)"},
      {"sinks", "4", "first positions never deleted"},
      {"flexible", "false", "budget per layer (G x b, split among KV heads by the greedy) instead of b per KV head"},
  };
  for (const PressParameter& p : per_step_parameters(false)) params.push_back(p);
  return {{"behavior_preserving",
           "keeps the entries whose deletion would move the next-token distribution most: estimated KL(full || "
           "compressed) through pass-through residuals, the final-norm Jacobian and the LM head's top-K rows; "
           "singleton pool, then greedy on the exact marginal KL",
           "Behavior-Preserving KV Cache Compression, arXiv 2610.06479 (estimator: our formulation, "
           "docs/methods/behavior_preserving.md)",
           params},
          [](const PressParams& p, const KvBudget& b) -> std::unique_ptr<Press> {
            Settings s{p.get_int("window", 0, 1 << 24), p.get_int("sinks", 0, 1 << 24), p.get_int("queries", 1, 4096),
                       p.get_int("top_k", 1, 1 << 24),
                       {p.get_double("pool", 1.0, 1e6), p.get_int("block", 1, 1 << 24), p.get_int("min_steps", 1, 1 << 24),
                        p.get_bool("flexible")},
                       read_trigger(p)};
            return std::make_unique<BehaviorPreservingPress>(p, b, s);
          },
          [](const PressParams& p) {
            const bool per_step = read_trigger(p).per_step();
            return PressRole{true, per_step, ExtraForward::kNone, true, !per_step};
          }};
}

}  // namespace deferkv
