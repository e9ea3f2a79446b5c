#include "eval/plots/consistency_plot.h"

#include <fmt/format.h>

#include "eval/plots/svg.h"

namespace deferkv::eval {
namespace {

constexpr double kLeft = 60, kTop = 40, kPlotWidth = 480, kPlotHeight = 260;

struct Series {
  const char* name;
  double ConsistencyPoint::*value;
  const char* colour;
};

}  // namespace

std::string consistency_plot_svg(const ConsistencyReport& report) {
  std::vector<ConsistencyPoint> probes, levels;
  for (const auto& p : report.points) (p.probe == "window" || p.probe == "deferkv" ? levels : probes).push_back(p);
  Svg svg(kLeft + kPlotWidth + 160, kTop + kPlotHeight + 60);
  svg.text(kLeft + kPlotWidth / 2, 22, fmt::format("Agreement with later decode attention ({} samples)", report.samples),
           14, "middle", 0, "bold");
  const auto x_of = [&](size_t i) {
    return kLeft + kPlotWidth * (static_cast<double>(i) + 0.5) / static_cast<double>(probes.size());
  };
  const auto y_of = [&](double v) { return kTop + kPlotHeight * (1.0 - v); };
  svg.rect(kLeft, kTop, kPlotWidth, kPlotHeight, "none", "#888888");
  for (int v = 0; v <= 10; v += 2) {
    svg.line(kLeft - 4, y_of(v / 10.0), kLeft, y_of(v / 10.0), "#888888");
    svg.text(kLeft - 6, y_of(v / 10.0) + 4, fmt::format("{:.1f}", v / 10.0), 10, "end");
  }
  for (size_t i = 0; i < probes.size(); ++i) svg.text(x_of(i), kTop + kPlotHeight + 16, probes[i].probe, 10);
  svg.text(kLeft + kPlotWidth / 2, kTop + kPlotHeight + 36, "probe: prompt offset (−) or decode step (+)", 12);
  // Prompt and decode probes are split by a vertical rule.
  for (size_t i = 1; i < probes.size(); ++i) {
    if (probes[i - 1].probe[0] == '-' && probes[i].probe[0] == '+') {
      const double x = (x_of(i - 1) + x_of(i)) / 2;
      svg.line(x, kTop, x, kTop + kPlotHeight, "#BBBBBB");
    }
  }
  const Series series[] = {{"JSD similarity", &ConsistencyPoint::jsd_similarity, "#1F77B4"},
                           {"top-B recall", &ConsistencyPoint::recall, "#D62728"}};
  double legend_y = kTop + 10;
  for (const Series& s : series) {
    for (size_t i = 1; i < probes.size(); ++i) {
      svg.line(x_of(i - 1), y_of(probes[i - 1].*s.value), x_of(i), y_of(probes[i].*s.value), s.colour);
    }
    for (size_t i = 0; i < probes.size(); ++i) svg.rect(x_of(i) - 2.5, y_of(probes[i].*s.value) - 2.5, 5, 5, s.colour);
    // The window and fused rows as short marks at the right edge, labelled.
    for (const auto& level : levels) {
      const double y = y_of(level.*s.value);
      svg.line(kLeft + kPlotWidth - 30, y, kLeft + kPlotWidth, y, s.colour);
      svg.text(kLeft + kPlotWidth + 4, y + 4, fmt::format("{} {:.3f}", level.probe, level.*s.value), 9, "start");
    }
    svg.rect(kLeft + kPlotWidth + 80, legend_y - 8, 10, 10, s.colour);
    svg.text(kLeft + kPlotWidth + 94, legend_y + 1, s.name, 10, "start");
    legend_y += 16;
  }
  return svg.str();
}

}  // namespace deferkv::eval
