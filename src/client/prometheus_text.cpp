#include "client/prometheus_text.h"

#include <charconv>

namespace deferkv::client {

std::optional<double> metric_value(std::string_view text, std::string_view name) {
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find('\n', at);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(at, end - at);
    at = end + 1;
    if (!line.starts_with(name) || line.size() <= name.size() || line[name.size()] != ' ') continue;
    line.remove_prefix(name.size());
    while (line.starts_with(' ')) line.remove_prefix(1);
    const std::string_view number = line.substr(0, line.find(' '));
    double value = 0;
    const auto [ptr, ec] = std::from_chars(number.data(), number.data() + number.size(), value);
    if (ec != std::errc() || ptr != number.data() + number.size()) return std::nullopt;
    return value;
  }
  return std::nullopt;
}

}  // namespace deferkv::client
