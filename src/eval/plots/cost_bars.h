#pragma once
// Memory and latency of each method as three bar panels side by side: peak KV MiB,
// prefill seconds and decode tokens per second (means over the method's samples, from
// the summary's last table), one bar per row, each panel on its own scale.
#include <string>

#include "eval/reports/summary.h"

namespace deferkv::eval {

std::string cost_bars_svg(const Summary& summary);

}  // namespace deferkv::eval
