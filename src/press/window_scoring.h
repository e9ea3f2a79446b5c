#pragma once
// The SnapKV family's scoring and selection, shared by snapkv, pyramidkv, adakv,
// chunkkv and deferkv: attention of the last w prompt queries, mean over the window and
// the GQA group, pooled along the tokens, then kept per head by an allocation rule
// [docs/methods/README.md, snapkv.md, pyramidkv.md, adakv.md].
#include <cstdint>
#include <string>
#include <vector>

#include "press/one_shot_press.h"
#include "press/pooling.h"

namespace deferkv {

struct WindowScoring {
  int64_t window;
  int64_t kernel;
  Pooling pooling;
  GroupReduction group;
};

// The parameters window, kernel, pooling and gqa, with the given defaults.
std::vector<PressParameter> window_scoring_parameters(int64_t window, int64_t kernel, const std::string& pooling);
WindowScoring read_window_scoring(const PressParams& params);
CaptureConfig window_capture(const WindowScoring& scoring);

// pool(attention[g][0 .. C_g)) for every head of the layer.
std::vector<std::vector<float>> pooled_candidate_scores(const LayerEviction& layer,
                                                        const std::vector<std::vector<float>>& attention,
                                                        const WindowScoring& scoring);

enum class Allocation { kUniform, kPyramid, kAdaKv };
Allocation parse_allocation(const std::string& name);  // snapkv | pyramidkv | adakv

// Per head, the candidates to keep: uniform b - w each (SnapKV); the layer's pyramid
// budget (PyramidKV, steepness beta); or head-adaptive shares of G*(b - w) with floor
// alpha (AdaKV).
std::vector<std::vector<int32_t>> select_by_allocation(const LayerEviction& layer,
                                                       const std::vector<std::vector<float>>& scores,
                                                       Allocation allocation, int64_t beta, double alpha);

}  // namespace deferkv
