#include "eval/plots/leaderboard_plot.h"

#include <algorithm>

#include <fmt/format.h>

#include "eval/plots/plot_style.h"
#include "eval/plots/svg.h"

namespace deferkv::eval {
namespace {

constexpr double kWidth = 760, kPlotHeight = 340;
constexpr double kLeft = 70, kRight = 230, kTop = 44, kBottom = 60, kLegendStep = 18;
constexpr std::string_view kAwareDash = "3 3", kCeilingDash = "6 4", kCeilingColour = "#555555";

}  // namespace

std::string leaderboard_svg(const Leaderboard& board) {
  // A press keeps its colour in both question modes, so the two lines read as one method.
  std::vector<std::string> presses;
  double top = board.full.value_or(0);
  for (const LeaderboardLine& line : board.lines) {
    if (std::find(presses.begin(), presses.end(), line.press) == presses.end()) presses.push_back(line.press);
    for (const auto& s : line.scores) top = std::max(top, s.value_or(0));
  }
  const size_t legend_rows = board.lines.size() + (board.full ? 1 : 0);
  const double height = std::max(kTop + kPlotHeight + kBottom, kTop + 10 + kLegendStep * static_cast<double>(legend_rows) + 20);
  const double plot_w = kWidth - kLeft - kRight, plot_h = kPlotHeight;
  const double y_max = round_axis_max(top);
  const auto x_of = [&](double ratio) { return kLeft + plot_w * ratio; };
  const auto y_of = [&](double score) { return kTop + plot_h * (1 - score / y_max); };

  Svg svg(kWidth, height);
  svg.text(kLeft + plot_w / 2, 24, "Score vs compression ratio (" + board.title + ")", 15, "middle", 0, "bold");
  draw_score_axes(svg, {kLeft, kTop, plot_w, plot_h}, y_max);
  for (double ratio : {0.0, 1.0}) svg.text(x_of(ratio), kTop + plot_h + 18, fmt::format("{:g}", ratio), 11);
  for (double ratio : board.ratios) svg.text(x_of(ratio), kTop + plot_h + 18, fmt::format("{:g}", ratio), 11);
  svg.text(kLeft + plot_w / 2, kTop + plot_h + 44, "compression ratio (share of the prompt's KV entries evicted)", 12);
  svg.text(18, kTop + plot_h / 2, "score (mean over tasks)", 12, "middle", -90);

  double legend_y = kTop + 10;
  const double legend_x = kLeft + plot_w + 20;
  for (const LeaderboardLine& line : board.lines) {
    const size_t p = static_cast<size_t>(std::find(presses.begin(), presses.end(), line.press) - presses.begin());
    const std::string_view colour = series_colour(p);
    const std::string_view dash = line.question_agnostic ? "" : kAwareDash;
    std::vector<std::pair<double, double>> points;
    for (size_t i = 0; i < board.ratios.size() && i < line.scores.size(); ++i) {
      if (line.scores[i]) points.emplace_back(x_of(board.ratios[i]), y_of(*line.scores[i]));
    }
    svg.polyline(points, colour, 2, dash);
    for (const auto& [x, y] : points) svg.circle(x, y, 3.5, colour);
    svg.polyline({{legend_x, legend_y}, {legend_x + 22, legend_y}}, colour, 2, dash);
    svg.text(legend_x + 28, legend_y + 4, line.question_agnostic ? line.press : line.press + " (question-aware)", 11,
             "start");
    legend_y += kLegendStep;
  }
  if (board.full) {
    svg.polyline({{kLeft, y_of(*board.full)}, {kLeft + plot_w, y_of(*board.full)}}, kCeilingColour, 1.5, kCeilingDash);
    svg.polyline({{legend_x, legend_y}, {legend_x + 22, legend_y}}, kCeilingColour, 1.5, kCeilingDash);
    svg.text(legend_x + 28, legend_y + 4, "full cache (ceiling)", 11, "start");
  }
  return svg.str();
}

}  // namespace deferkv::eval
