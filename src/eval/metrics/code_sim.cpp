#include "eval/metrics/code_sim.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "eval/metrics/python_text.h"

namespace deferkv::eval {

std::string_view first_code_line(std::string_view prediction) {
  for (std::string_view line : split_on(lstrip_chars(prediction, "\n"), '\n')) {
    if (line.find('`') == std::string_view::npos && line.find('#') == std::string_view::npos &&
        line.find("//") == std::string_view::npos) {
      return line;
    }
  }
  return {};
}

size_t indel_distance(std::u32string_view a, std::u32string_view b) {
  // |a| + |b| − 2 · LCS, with one row of the LCS table.
  std::vector<size_t> row(b.size() + 1, 0);
  for (char32_t ca : a) {
    size_t diagonal = 0;  // row[j - 1] of the previous row
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = ca == b[j - 1] ? diagonal + 1 : std::max(row[j], row[j - 1]);
      diagonal = above;
    }
  }
  return a.size() + b.size() - 2 * row[b.size()];
}

int fuzz_ratio(std::string_view a, std::string_view b) {
  if (a == b) return 100;
  if (a.empty() || b.empty()) return 0;
  const std::u32string ca = to_code_points(a), cb = to_code_points(b);
  const auto total = static_cast<double>(ca.size() + cb.size());
  const double ratio = (total - static_cast<double>(indel_distance(ca, cb))) / total;
  // Python's round(): half to even, which nearbyint does in the default rounding mode.
  return static_cast<int>(std::nearbyint(100 * ratio));
}

double code_sim(std::string_view prediction, std::string_view reference) {
  return fuzz_ratio(first_code_line(prediction), reference) / 100.0;
}

}  // namespace deferkv::eval
