#pragma once
// A protocol's leaderboard as a plot: score against compression ratio (a linear axis from 0
// to 1, as kvpress's leaderboard draws it), one line per press, its question-aware line
// dashed in the same colour, the full cache as a level line across: the ceiling. In the
// style of score_budget_plot.h, whose axis is categorical.
#include <string>

#include "eval/reports/leaderboard.h"

namespace deferkv::eval {

std::string leaderboard_svg(const Leaderboard& board);

}  // namespace deferkv::eval
