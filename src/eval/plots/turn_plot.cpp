#include "eval/plots/turn_plot.h"

#include <algorithm>

#include <fmt/format.h>

#include "eval/plots/plot_style.h"
#include "eval/plots/svg.h"

namespace deferkv::eval {
namespace {

constexpr double kWidth = 680, kHeight = 400;
constexpr double kLeft = 70, kRight = 170, kTop = 44, kBottom = 60;

}  // namespace

std::string turn_score_svg(const TurnSummary& summary) {
  double top = 0;
  for (const TurnRow& row : summary.rows) {
    for (const auto& s : row.scores) top = std::max(top, s.value_or(0));
  }
  const double y_max = round_axis_max(top);
  const double plot_w = kWidth - kLeft - kRight, plot_h = kHeight - kTop - kBottom;
  const auto turns = static_cast<double>(std::max<int64_t>(summary.questions, 1));
  const auto x_of = [&](size_t k) { return kLeft + plot_w * (static_cast<double>(k) + 0.5) / turns; };
  const auto y_of = [&](double score) { return kTop + plot_h * (1 - score / y_max); };

  Svg svg(kWidth, kHeight);
  svg.text(kLeft + plot_w / 2, 24, fmt::format("Score by turn ({} questions per context, {})", summary.questions,
                                               summary.mode),
           15, "middle", 0, "bold");
  draw_score_axes(svg, {kLeft, kTop, plot_w, plot_h}, y_max);
  for (int64_t k = 0; k < summary.questions; ++k) {
    svg.text(x_of(static_cast<size_t>(k)), kTop + plot_h + 18, std::to_string(k + 1), 11);
  }
  svg.text(kLeft + plot_w / 2, kHeight - 14, "turn (question over the same compressed context)", 12);
  svg.text(18, kTop + plot_h / 2, "score", 12, "middle", -90);
  double legend_y = kTop + 10;
  const double legend_x = kLeft + plot_w + 20;
  for (size_t m = 0; m < summary.rows.size(); ++m) {
    std::vector<std::pair<double, double>> line;
    for (size_t k = 0; k < summary.rows[m].scores.size(); ++k) {
      if (summary.rows[m].scores[k]) line.emplace_back(x_of(k), y_of(*summary.rows[m].scores[k]));
    }
    svg.polyline(line, series_colour(m));
    for (const auto& [x, y] : line) svg.circle(x, y, 3.5, series_colour(m));
    svg.line(legend_x, legend_y, legend_x + 22, legend_y, series_colour(m));
    svg.text(legend_x + 28, legend_y + 4, summary.rows[m].label, 11, "start");
    legend_y += 18;
  }
  return svg.str();
}

}  // namespace deferkv::eval
