#include "eval/plots/cost_bars.h"

#include <algorithm>
#include <functional>

#include <fmt/format.h>

#include "eval/plots/plot_style.h"
#include "eval/plots/svg.h"

namespace deferkv::eval {
namespace {

constexpr double kLabelWidth = 170, kPanelWidth = 210, kPanelGap = 20, kRowHeight = 22, kTop = 64, kBottom = 24;

struct Panel {
  const char* title;
  const char* format;  // of the value written at the bar's end
  std::function<double(const MethodCost&)> value;
};

}  // namespace

std::string cost_bars_svg(const Summary& summary) {
  // KV held after eviction is what compression saves; a method that evicted nothing holds
  // its peak. Peak KV alone makes every one-shot method look like the full cache.
  const std::vector<Panel> panels = {
      {"KV after eviction (MiB)", "{:.2f}",
       [](const MethodCost& c) { return c.kv_bytes_after_eviction.value_or(static_cast<double>(c.peak_kv_bytes)) / 1048576.0; }},
      {"peak KV (MiB)", "{:.2f}", [](const MethodCost& c) { return static_cast<double>(c.peak_kv_bytes) / 1048576.0; }},
      {"prefill (s)", "{:.3f}", [](const MethodCost& c) { return c.prefill_seconds; }},
      {"decode (tok/s)", "{:.1f}", [](const MethodCost& c) { return c.decode_tokens_per_second; }},
  };
  const std::vector<SummaryRow> no_rows;
  const std::vector<SummaryRow>& rows = summary.tables.empty() ? no_rows : summary.tables.back().rows;
  const double width = kLabelWidth + static_cast<double>(panels.size()) * (kPanelWidth + kPanelGap);
  const double height = kTop + kRowHeight * static_cast<double>(std::max<size_t>(rows.size(), 1)) + kBottom;

  Svg svg(width, height);
  svg.text(width / 2, 22, "Memory and latency per method (means over samples; peak KV: the max)", 15, "middle", 0, "bold");
  for (size_t r = 0; r < rows.size(); ++r) {
    svg.text(kLabelWidth - 8, kTop + kRowHeight * (static_cast<double>(r) + 0.5) + 4, rows[r].label, 11, "end");
  }
  for (size_t p = 0; p < panels.size(); ++p) {
    const double left = kLabelWidth + static_cast<double>(p) * (kPanelWidth + kPanelGap);
    const double bar_room = kPanelWidth - 50;  // the value's text goes after the bar
    double top = 0;
    for (const SummaryRow& row : rows) top = std::max(top, panels[p].value(row.cost));
    const double x_max = round_axis_max(top);
    svg.text(left + kPanelWidth / 2, kTop - 14, panels[p].title, 12, "middle", 0, "bold");
    svg.line(left, kTop - 4, left, height - kBottom + 4, "black");
    for (size_t r = 0; r < rows.size(); ++r) {
      const double value = panels[p].value(rows[r].cost);
      const double y = kTop + kRowHeight * static_cast<double>(r) + 3;
      const double w = bar_room * value / x_max;
      svg.rect(left, y, w, kRowHeight - 6, series_colour(r));
      svg.text(left + w + 4, y + kRowHeight / 2 + 1, fmt::format(fmt::runtime(panels[p].format), value), 10, "start");
    }
  }
  return svg.str();
}

}  // namespace deferkv::eval
