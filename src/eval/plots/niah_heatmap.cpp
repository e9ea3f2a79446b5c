#include "eval/plots/niah_heatmap.h"

#include <algorithm>
#include <array>
#include <cmath>

#include <fmt/format.h>

#include "eval/plots/svg.h"

namespace deferkv::eval {
namespace {

struct Rgb {
  double r, g, b;
};
constexpr std::array<Rgb, 3> kStops = {{{0xF0, 0x49, 0x6E}, {0xEB, 0xB8, 0x39}, {0x0C, 0xD7, 0x9F}}};

constexpr double kCell = 28, kLeft = 70, kTop = 50, kBarWidth = 14, kBarGap = 24;

}  // namespace

std::string niah_score_colour(double score) {
  const double t = std::clamp(score / 100, 0.0, 1.0) * 2;  // 0..2 across the two segments
  const size_t i = std::min<size_t>(static_cast<size_t>(t), 1);
  const double f = t - static_cast<double>(i);
  const auto mix = [&](double a, double b) { return static_cast<int>(std::lround(a + (b - a) * f)); };
  return fmt::format("#{:02X}{:02X}{:02X}", mix(kStops[i].r, kStops[i + 1].r), mix(kStops[i].g, kStops[i + 1].g),
                     mix(kStops[i].b, kStops[i + 1].b));
}

std::string niah_heatmap_svg(const NiahGrid& grid) {
  const auto cols = static_cast<double>(grid.lengths.size()), rows = static_cast<double>(grid.depths.size());
  const std::string average = grid.average ? fmt::format("{:.2f}", *grid.average) : "n/a";
  const std::string title = fmt::format("{} — average score {}", grid.label, average);
  // Wide enough for the title too: bold 14 px text is at most about 9 px a character.
  const double grid_width = kLeft + cols * kCell + kBarGap + kBarWidth + 50;
  const double width = std::max(grid_width, 9.0 * static_cast<double>(title.size()) + 20), height = kTop + rows * kCell + 60;
  Svg svg(width, height);
  svg.text(width / 2, 22, title, 14, "middle", 0, "bold");
  for (size_t d = 0; d < grid.depths.size(); ++d) {
    const double y = kTop + static_cast<double>(d) * kCell;
    svg.text(kLeft - 6, y + kCell / 2 + 4, fmt::format("{:g}", grid.depths[d]), 10, "end");
    for (size_t l = 0; l < grid.lengths.size(); ++l) {
      const std::optional<double>& cell = grid.cells[d][l];
      svg.rect(kLeft + static_cast<double>(l) * kCell, y, kCell, kCell, cell ? niah_score_colour(*cell) : "#DDDDDD",
               "white");
    }
  }
  for (size_t l = 0; l < grid.lengths.size(); ++l) {
    const double x = kLeft + (static_cast<double>(l) + 0.5) * kCell, y = kTop + rows * kCell + 8;
    svg.text(x, y, std::to_string(grid.lengths[l]), 10, "end", -45);
  }
  svg.text(kLeft + cols * kCell / 2, height - 6, "Context length (tokens)", 12);
  svg.text(16, kTop + rows * kCell / 2, "Depth (%)", 12, "middle", -90);
  // The colour bar, 100 at the top.
  const double bx = kLeft + cols * kCell + kBarGap, bar = rows * kCell;
  constexpr int kSteps = 50;
  for (int i = 0; i < kSteps; ++i) {
    svg.rect(bx, kTop + bar * i / kSteps, kBarWidth, bar / kSteps + 0.5, niah_score_colour(100.0 * (kSteps - i - 0.5) / kSteps));
  }
  for (int v = 0; v <= 100; v += 50) svg.text(bx + kBarWidth + 4, kTop + bar * (100 - v) / 100 + 4, std::to_string(v), 10, "start");
  return svg.str();
}

}  // namespace deferkv::eval
