#include "press/core/window_scoring.h"

#include <algorithm>

#include "deferkv/error.h"

namespace deferkv {

std::vector<PressParameter> window_scoring_parameters(int64_t window, int64_t kernel, Pooling pooling) {
  return {
      {"window", std::to_string(window), "observation window: the last w prompt queries (always kept)"},
      {"kernel", std::to_string(kernel), "pooling kernel along the tokens (odd)"},
      {"pooling", pooling_name(pooling), "max | avg | none"},
      {"gqa", "mean", "reduction over a KV head's query heads: mean | max | sum"},
  };
}

WindowScoring read_window_scoring(const PressParams& params) {
  WindowScoring s;
  s.window = params.get_int("window", 1, 1 << 20);
  s.kernel = params.get_int("kernel", 1, 1023);
  if (s.kernel % 2 == 0) fail("the pooling kernel must be odd, got {}", s.kernel);
  s.pooling = parse_pooling(params.get_choice("pooling", {"max", "avg", "none"}));
  const std::string gqa = params.get_choice("gqa", {"mean", "max", "sum"});
  s.group = gqa == "mean" ? GroupReduction::kMean : gqa == "max" ? GroupReduction::kMax : GroupReduction::kSum;
  return s;
}

CaptureConfig window_capture(const WindowScoring& scoring) {
  CaptureConfig c;
  c.observations = {Observation::prompt_window(scoring.window)};
  c.group = scoring.group;
  return c;
}

std::vector<std::vector<float>> pooled_candidate_scores(const LayerEviction& layer,
                                                        const std::vector<std::vector<float>>& attention,
                                                        const WindowScoring& scoring) {
  std::vector<std::vector<float>> out(static_cast<size_t>(layer.n_head_kv()));
  for (int64_t g = 0; g < layer.n_head_kv(); ++g) {
    const std::vector<float>& a = attention[static_cast<size_t>(g)];
    const int64_t c = layer.candidates[g];
    if (static_cast<int64_t>(a.size()) < c) fail("internal: {} scores for {} candidates", a.size(), c);
    out[g] = pool_scores(std::vector<float>(a.begin(), a.begin() + c), scoring.pooling, scoring.kernel);
  }
  return out;
}

namespace {

class WindowScoredPress final : public ScoredPress {
 public:
  WindowScoredPress(const PressParams& params, const KvBudget& budget, const WindowScoring& scoring)
      : ScoredPress(params, budget, parts(params, scoring)), scoring_(scoring) {}

 protected:
  std::vector<std::vector<float>> score(const LayerEviction& layer) override {
    return pooled_candidate_scores(layer, layer.prompt_attention, scoring_);
  }

 private:
  static ScoredParts parts(const PressParams& params, const WindowScoring& scoring) {
    ScoredParts p = read_scored_parts(params);
    p.capture = window_capture(scoring);
    p.window = scoring.window;
    return p;
  }

  WindowScoring scoring_;
};

}  // namespace

PressMethod window_scored_method(const std::string& name, const std::string& summary, const std::string& paper,
                                 const SharedDefaults& defaults, std::vector<PressParameter> own) {
  std::vector<PressParameter> parameters = window_scoring_parameters(32, 7, Pooling::kMax);
  parameters.insert(parameters.end(), own.begin(), own.end());
  return {{name, summary, paper, with_shared_parameters(std::move(parameters), defaults)},
          [](const PressParams& p, const KvBudget& b) -> std::unique_ptr<Press> {
            return std::make_unique<WindowScoredPress>(p, b, read_window_scoring(p));
          },
          scored_press_role};
}

}  // namespace deferkv
