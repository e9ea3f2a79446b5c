#pragma once
// What the plots share: the series colours, a round axis maximum, the score axis, and a
// row's label as a file name.
#include <cctype>
#include <cmath>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "eval/plots/svg.h"

namespace deferkv::eval {

// Tableau-10: distinct on screen and in print.
inline std::string_view series_colour(size_t i) {
  static constexpr std::string_view kColours[] = {"#4E79A7", "#F28E2B", "#E15759", "#76B7B2", "#59A14F",
                                                  "#EDC948", "#B07AA1", "#FF9DA7", "#9C755F", "#BAB0AC"};
  return kColours[i % std::size(kColours)];
}

// The smallest of 1, 2, 5 × 10^k that is >= value (1 for value <= 0), so ticks at
// quarters of it are readable numbers.
inline double round_axis_max(double value) {
  if (value <= 0) return 1;
  const double decade = std::pow(10.0, std::floor(std::log10(value)));
  for (double step : {1.0, 2.0, 5.0, 10.0}) {
    if (step * decade >= value) return step * decade;
  }
  return 10 * decade;
}

// The plotting area inside the axes, in the SVG's coordinates.
struct PlotFrame {
  double left, top, width, height;
  double y_of(double score, double y_max) const { return top + height * (1 - score / y_max); }
};

// A score axis from 0 to y_max: a grid line and a label at each quarter, then the two axes.
inline void draw_score_axes(Svg& svg, const PlotFrame& f, double y_max) {
  for (int tick = 0; tick <= 4; ++tick) {
    const double value = y_max * tick / 4, y = f.y_of(value, y_max);
    svg.line(f.left, y, f.left + f.width, y, "#DDDDDD");
    svg.text(f.left - 8, y + 4, fmt::format("{:g}", value), 11, "end");
  }
  svg.line(f.left, f.top, f.left, f.top + f.height, "black");
  svg.line(f.left, f.top + f.height, f.left + f.width, f.top + f.height, "black");
}

// "deferkv:d=1,eta=0.7@64" → "deferkv_d=1_eta=0.7@64": a label as a file name.
inline std::string file_label(const std::string& label) {
  std::string out;
  for (char c : label) out += std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '@' || c == '-' || c == '=' ? c : '_';
  return out;
}

}  // namespace deferkv::eval
