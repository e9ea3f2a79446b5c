#pragma once
// Score against KV budget, one line per press: the budgets across in the order the sweep
// was given them (entries per KV head, or ratios), each method's Avg. from the summary's
// last table up; the full cache, when the sweep has it, as a dashed level line.
#include <optional>
#include <string>

#include "eval/reports/summary.h"

namespace deferkv::eval {

// nullopt when the summary's rows hold fewer than two budgets (nothing to draw a line on).
std::optional<std::string> score_budget_svg(const Summary& summary);

}  // namespace deferkv::eval
