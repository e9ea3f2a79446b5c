#include "press/window_scoring.h"

#include <algorithm>

#include "deferkv/error.h"
#include "press/allocation.h"
#include "press/selection.h"

namespace deferkv {

std::vector<PressParameter> window_scoring_parameters(int64_t window, int64_t kernel, const std::string& pooling) {
  return {
      {"window", std::to_string(window), "observation window: the last w prompt queries (always kept)"},
      {"kernel", std::to_string(kernel), "pooling kernel along the tokens (odd)"},
      {"pooling", pooling, "max | avg | none"},
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
  c.window = scoring.window;
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

Allocation parse_allocation(const std::string& name) {
  if (name == "snapkv") return Allocation::kUniform;
  if (name == "pyramidkv") return Allocation::kPyramid;
  if (name == "adakv") return Allocation::kAdaKv;
  fail("unknown allocation '{}' (known: snapkv, pyramidkv, adakv)", name);
}

std::vector<std::vector<int32_t>> select_by_allocation(const LayerEviction& layer,
                                                       const std::vector<std::vector<float>>& scores,
                                                       Allocation allocation, int64_t beta, double alpha) {
  const int64_t heads = layer.n_head_kv();
  const int64_t base = std::max<int64_t>(0, layer.candidate_budget());
  std::vector<int64_t> budgets(static_cast<size_t>(heads), base);
  if (allocation == Allocation::kPyramid) {
    // Every head of a layer has the same candidates at a prompt's first eviction; take
    // the smallest so no head is asked for more than it has.
    const int64_t c = *std::min_element(layer.candidates.begin(), layer.candidates.end());
    const int64_t layer_budget = pyramid_layer_budgets(base, c, layer.n_layer, beta)[layer.layer];
    budgets.assign(static_cast<size_t>(heads), layer_budget);
  } else if (allocation == Allocation::kAdaKv) {
    budgets = adakv_head_budgets(scores, base, alpha);
  }
  std::vector<std::vector<int32_t>> keep(static_cast<size_t>(heads));
  for (int64_t g = 0; g < heads; ++g) keep[g] = top_k(scores[g], budgets[g]);
  return keep;
}

}  // namespace deferkv
