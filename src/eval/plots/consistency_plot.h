#pragma once
// The attention-consistency figure (DeferKV's Figures 1–2 shape): JSD similarity and
// top-B recall per probe position, prompt-end offsets then decode steps, with SnapKV's
// window row and DeferKV's fused row as dashed reference levels.
#include <string>

#include "eval/analysis/attention_consistency.h"

namespace deferkv::eval {

std::string consistency_plot_svg(const ConsistencyReport& report);

}  // namespace deferkv::eval
