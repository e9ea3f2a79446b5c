#pragma once
// The SnapKV family's scorer, shared by snapkv, pyramidkv, adakv, chunkkv, deferkv and
// lookaheadkv: attention of the last w prompt queries, mean over the window and the GQA
// group, pooled along the tokens [docs/methods/README.md, snapkv.md]. The methods of the
// family differ only in their allocation and selection defaults.
#include <cstdint>
#include <string>
#include <vector>

#include "press/core/pooling.h"
#include "press/core/scored_press.h"

namespace deferkv {

struct WindowScoring {
  int64_t window;
  int64_t kernel;
  Pooling pooling;
  GroupReduction group;
};

// The parameters window, kernel, pooling and gqa, with the given defaults.
std::vector<PressParameter> window_scoring_parameters(int64_t window, int64_t kernel, Pooling pooling);
WindowScoring read_window_scoring(const PressParams& params);
CaptureConfig window_capture(const WindowScoring& scoring);

// pool(attention[g][0 .. C_g)) for every head of the layer.
std::vector<std::vector<float>> pooled_candidate_scores(const LayerEviction& layer,
                                                        const std::vector<std::vector<float>>& attention,
                                                        const WindowScoring& scoring);

// A method of the family: the window scorer (window 32, max-pool 7) with the shared
// parts, their defaults given.
// `own`: parameters of the method's own after the window scorer's (CriticalKV's two stages).
PressMethod window_scored_method(const std::string& name, const std::string& summary, const std::string& paper,
                                 const SharedDefaults& defaults, std::vector<PressParameter> own = {});

}  // namespace deferkv
