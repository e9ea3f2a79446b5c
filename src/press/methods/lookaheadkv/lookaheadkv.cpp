// LookaheadKV [docs/methods/lookaheadkv.md; the inference path is OUR FORMULATION]: learned lookahead
// token embeddings, with LoRA deltas trained for them, read from a weights file
// (docs/lookaheadkv_weights.md), are fed after the prompt at positions T, T+1, ...; the
// deltas apply at those rows only, so the prompt's keys, values and logits are untouched.
// Per layer and KV head, the rows' attention on the prompt entries (softmax over the
// prompt, mean or sum over the rows, GQA reduction over the group) is pooled, and each
// head keeps its top b - w older entries plus the last w prompt tokens (SnapKV's
// selection). The rows' entries are dropped before decoding, which starts from the
// prompt's logits. Only the lookahead rows observe: the window is protected, not scoring.
// Defaults: window 32, max-pool 7, GQA mean, as SnapKV and SpecKV here (§13), so that at
// one budget these methods differ only in what observes the prompt. Weights are trained for
// one model: without weights=, the press reads <model>.lookahead.gguf beside the model's file
// (models/ ships them for the in-house model), when the session attaches it.
#include <filesystem>
#include <optional>

#include "deferkv/error.h"
#include "press/core/window_scoring.h"
#include "press/methods/lookaheadkv/lookahead_attention.h"
#include "press/methods/lookaheadkv/lookahead_weights.h"
#include "press/registry.h"

namespace deferkv {
namespace {

class LookaheadKvPress final : public ScoredPress {
 public:
  // `weights` unset: found beside the model at on_attach.
  LookaheadKvPress(const PressParams& params, const KvBudget& budget, const WindowScoring& scoring, bool sum_rows,
                   std::string path, std::optional<LookaheadWeights> weights)
      : ScoredPress(params, budget, parts(params, scoring)), scoring_(scoring), sum_rows_(sum_rows),
        path_(std::move(path)), weights_(std::move(weights)) {}

  void on_attach(const PressModelShape& shape, PressHost& host) override {
    ScoredPress::on_attach(shape, host);
    if (!weights_) {
      path_ = default_weights_path(host.model_path());
      if (!std::filesystem::is_regular_file(path_)) {
        fail("press 'lookaheadkv' needs weights=PATH: none was given and there is no '{}' beside the model "
             "(tools/train/lookahead.py trains them; docs/methods/lookaheadkv.md)",
             path_);
      }
      weights_ = load_lookahead_weights(path_);
    }
    check_lookahead_weights_fit(*weights_, shape, path_);
    host.reserve_after_prompt(weights_->rows.n_rows());
  }

  // Every layer is scored by the rows, which run after the whole prompt: the prompt stays
  // whole in every layer until then, and ScoredPress evicts every layer at the prompt's end.
  PressPoints points() const override {
    return ScoredPress::points().without(PressPoint::kPromptLayerEnd).with(PressPoint::kPromptEnd);
  }
  void act(const PressAt& at, KvCache& cache) override {
    // The rows run only for a prompt that will be compressed, before ScoredPress evicts;
    // only they observe.
    if (at.point == PressPoint::kPromptEnd && will_evict()) {
      host("runs lookahead rows")
          .run_after_prompt(weights_->rows, [this](const AttentionEvent& event) { attention_.observe(event); });
    }
    ScoredPress::act(at, cache);
    if (at.point == PressPoint::kPromptBegin) {
      const float row_weight = sum_rows_ ? 1.0f : 1.0f / static_cast<float>(weights_->rows.n_rows());
      attention_.begin(at.first_position + at.n_tokens, row_weight, scoring_.group);
    }
  }

 protected:
  std::vector<std::vector<float>> score(const LayerEviction& layer) override {
    const auto& scores = attention_.layer(layer.layer);
    if (static_cast<int64_t>(scores.size()) != layer.n_head_kv()) {
      fail("press '{}' saw no lookahead rows in layer {}: the session did not run them", describe(), layer.layer);
    }
    return pooled_candidate_scores(layer, scores, scoring_);
  }

 private:
  // Only the rows observe (the press's own capture); the window is protected.
  static ScoredParts parts(const PressParams& params, const WindowScoring& scoring) {
    ScoredParts p = read_scored_parts(params);
    p.window = scoring.window;
    return p;
  }

  // models/deferkv-retrieval-5m.gguf -> models/deferkv-retrieval-5m.lookahead.gguf
  static std::string default_weights_path(const std::string& model_path) {
    std::filesystem::path p(model_path);
    p.replace_extension(".lookahead.gguf");
    return p.string();
  }

  WindowScoring scoring_;
  bool sum_rows_;
  std::string path_;
  std::optional<LookaheadWeights> weights_;
  LookaheadAttention attention_;
};

}  // namespace

PressMethod lookaheadkv_method() {
  auto params = window_scoring_parameters(32, 7, Pooling::kMax);
  params[0].help = "protected window: the last w prompt tokens, always kept (only the lookahead rows observe)";
  params.insert(params.begin(),
                PressParameter{"weights", "", "LookaheadKV weights GGUF: lookahead embeddings and LoRA deltas (format: "
                                              "docs/lookaheadkv_weights.md); empty: <model>.lookahead.gguf beside "
                                              "the model's file"});
  params.push_back({"queries", "mean", "reduction over the lookahead rows' queries: mean | sum"});
  // The rows observe the prompt once, at its end: no later trigger.
  return {{"lookaheadkv", "learned lookahead embeddings (LoRA at their rows) observe the prompt; SnapKV selection "
                          "(weights trained for the model: weights=FILE or <model>.lookahead.gguf)",
           "LookaheadKV, arXiv 2603.10899", with_shared_parameters(params, {.triggers = false})},
          [](const PressParams& p, const KvBudget& b) -> std::unique_ptr<Press> {
            const std::string path = p.get_string("weights");
            std::optional<LookaheadWeights> weights;
            if (!path.empty()) weights = load_lookahead_weights(path);  // a bad file fails here, by name
            return std::make_unique<LookaheadKvPress>(p, b, read_window_scoring(p),
                                                      p.get_choice("queries", {"mean", "sum"}) == "sum", path,
                                                      std::move(weights));
          },
          [](const PressParams&) { return PressRole{true, false, ExtraForward::kRows}; }};
}

}  // namespace deferkv
