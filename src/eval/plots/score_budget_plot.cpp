#include "eval/plots/score_budget_plot.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "eval/plots/plot_style.h"
#include "eval/plots/svg.h"

namespace deferkv::eval {
namespace {

constexpr double kWidth = 680, kHeight = 400;
constexpr double kLeft = 70, kRight = 170, kTop = 44, kBottom = 60;

template <typename T>
size_t index_of(std::vector<T>& items, const T& item) {
  const auto it = std::find(items.begin(), items.end(), item);
  if (it != items.end()) return static_cast<size_t>(it - items.begin());
  items.push_back(item);
  return items.size() - 1;
}

}  // namespace

std::optional<std::string> score_budget_svg(const Summary& summary) {
  if (summary.tables.empty()) return std::nullopt;
  const SummaryTable& table = summary.tables.back();
  std::vector<std::string> budgets, presses;
  std::map<std::pair<size_t, size_t>, double> points;  // (press, budget) → Avg.
  std::optional<double> full;
  double top = 0;
  for (const SummaryRow& row : table.rows) {
    if (!row.average) continue;
    top = std::max(top, *row.average);
    if (row.budget.empty()) {
      full = row.average;
      continue;
    }
    const size_t b = index_of(budgets, row.budget);
    points[{index_of(presses, row.method), b}] = *row.average;
  }
  if (budgets.size() < 2) return std::nullopt;

  const double y_max = round_axis_max(top);
  const double plot_w = kWidth - kLeft - kRight, plot_h = kHeight - kTop - kBottom;
  const auto x_of = [&](size_t b) { return kLeft + plot_w * (static_cast<double>(b) + 0.5) / static_cast<double>(budgets.size()); };
  const auto y_of = [&](double score) { return kTop + plot_h * (1 - score / y_max); };

  Svg svg(kWidth, kHeight);
  svg.text(kLeft + plot_w / 2, 24, "Score vs KV budget (" + table.title + ", Avg.)", 15, "middle", 0, "bold");
  draw_score_axes(svg, {kLeft, kTop, plot_w, plot_h}, y_max);
  for (size_t b = 0; b < budgets.size(); ++b) svg.text(x_of(b), kTop + plot_h + 18, budgets[b], 11);
  const bool ratios = budgets.front().starts_with('r');
  svg.text(kLeft + plot_w / 2, kHeight - 14, ratios ? "compression ratio" : "KV budget (prompt entries per KV head)", 12);
  svg.text(18, kTop + plot_h / 2, "score", 12, "middle", -90);

  double legend_y = kTop + 10;
  const double legend_x = kLeft + plot_w + 20;
  for (size_t p = 0; p < presses.size(); ++p) {
    std::vector<std::pair<double, double>> line;
    for (size_t b = 0; b < budgets.size(); ++b) {
      const auto it = points.find({p, b});
      if (it != points.end()) line.emplace_back(x_of(b), y_of(it->second));
    }
    svg.polyline(line, series_colour(p));
    for (const auto& [x, y] : line) svg.circle(x, y, 3.5, series_colour(p));
    svg.line(legend_x, legend_y, legend_x + 22, legend_y, series_colour(p));
    svg.text(legend_x + 28, legend_y + 4, presses[p], 11, "start");
    legend_y += 18;
  }
  if (full) {
    svg.polyline({{kLeft, y_of(*full)}, {kLeft + plot_w, y_of(*full)}}, "#555555", 1.5, "6 4");
    svg.polyline({{legend_x, legend_y}, {legend_x + 22, legend_y}}, "#555555", 1.5, "6 4");
    svg.text(legend_x + 28, legend_y + 4, "full cache", 11, "start");
  }
  return svg.str();
}

}  // namespace deferkv::eval
