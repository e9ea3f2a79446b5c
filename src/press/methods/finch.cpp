// Finch [docs/methods/finch.md]: SnapKV's scoring with the prompt's question as the
// observation window, its size given per prompt (PressAt::question_tokens), each window
// query's attention weighted by its position (kvpress's normalize_scores), no pooling;
// each KV head keeps its top b - q plus the question, and by default the kept keys are
// re-rotated to 0..n-1 (docs/methods/key_rerotation.md).
#include <algorithm>

#include "press/core/scored_press.h"

namespace deferkv {
namespace {

// Whether a window query's attention is weighted by its position before the window mean.
enum class WindowNormalisation { kNone, kByPosition };

class FinchPress final : public ScoredPress {
 public:
  FinchPress(const PressParams& params, const KvBudget& budget, ScoredParts parts, WindowNormalisation normalisation)
      : ScoredPress(params, budget, parts), fallback_window_(parts.window), normalisation_(normalisation) {}

  void act(const PressAt& at, KvCache& cache) override {
    if (at.point == PressPoint::kPromptBegin) size_window(at.first_position, at.n_tokens, at.question_tokens);
    ScoredPress::act(at, cache);
  }

 protected:
  std::vector<std::vector<float>> score(const LayerEviction& layer) override { return layer.candidate_attention(); }

 private:
  // The window of the prefill about to begin: its question, else the fallback.
  void size_window(int64_t first_position, int64_t n_tokens, int64_t question) {
    const int64_t end = first_position + n_tokens;
    // [OUR FORMULATION] Without a question (question-agnostic mode, a prompt given whole)
    // the window is the last `window` tokens; a question longer than the budget is cut to
    // its last b tokens, so that the budget holds.
    int64_t w = question > 0 ? question : fallback_window_;
    w = std::min({w, n_tokens, std::max<int64_t>(budget().resolve(end), 1)});
    std::vector<float> weights;
    if (normalisation_ == WindowNormalisation::kByPosition) {
      // kvpress multiplies the query at position p by p (its count of non-zero weights,
      // as it counts them), then takes the window's mean.
      for (int64_t i = 0; i < w; ++i) weights.push_back(static_cast<float>(end - w + i) / static_cast<float>(w));
    }
    set_window(w, std::move(weights));
  }

  int64_t fallback_window_;
  WindowNormalisation normalisation_;
};

}  // namespace

PressMethod finch_method() {
  return {{"finch", "the question's attention, position-weighted, top-k per KV head at prefill end; keys re-rotated",
           "Corallo and Papotti, TACL 2024",
           with_shared_parameters({{"window", "32", "the window when the prompt gives no question: its last w tokens"},
                                   {"normalize", "true", "weight each question query's attention by its position"},
                                   rerotation_parameter(true)})},
          [](const PressParams& p, const KvBudget& b) -> std::unique_ptr<Press> {
            ScoredParts parts = read_scored_parts(p);
            parts.window = p.get_int("window", 1, 1 << 20);
            parts.capture.observations = {Observation::prompt_window(parts.window)};
            const auto normalisation = p.get_bool("normalize") ? WindowNormalisation::kByPosition : WindowNormalisation::kNone;
            return std::make_unique<FinchPress>(p, b, std::move(parts), normalisation);
          },
          scored_press_role};
}

}  // namespace deferkv
