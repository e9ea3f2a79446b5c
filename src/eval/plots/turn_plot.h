#pragma once
// Score against turn (eval --questions-per-context), one line per method: how a context
// compressed once serves its later questions (SCBench's question).
#include <string>

#include "eval/reports/turn_summary.h"

namespace deferkv::eval {

std::string turn_score_svg(const TurnSummary& summary);

}  // namespace deferkv::eval
