#pragma once
// What the plots share: the series colours, a round axis maximum, and a row's label as a
// file name.
#include <cctype>
#include <cmath>
#include <string>
#include <string_view>

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

// "deferkv:d=1,eta=0.7@64" → "deferkv_d=1_eta=0.7@64": a label as a file name.
inline std::string file_label(const std::string& label) {
  std::string out;
  for (char c : label) out += std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '@' || c == '-' || c == '=' ? c : '_';
  return out;
}

}  // namespace deferkv::eval
