#include "server/byte_size.h"

#include <array>
#include <charconv>
#include <utility>

#include "deferkv/error.h"

namespace deferkv::server {

int64_t parse_byte_size(std::string_view text) {
  static constexpr std::array<std::pair<std::string_view, int64_t>, 9> kUnits{{
      {"KiB", int64_t{1} << 10}, {"MiB", int64_t{1} << 20}, {"GiB", int64_t{1} << 30},
      {"TiB", int64_t{1} << 40}, {"KB", 1000}, {"MB", 1000000}, {"GB", 1000000000},
      {"TB", 1000000000000}, {"B", 1},
  }};
  int64_t multiplier = 1;
  std::string_view number = text;
  for (const auto& [suffix, factor] : kUnits) {
    if (number.size() > suffix.size() && number.ends_with(suffix)) {
      number.remove_suffix(suffix.size());
      multiplier = factor;
      break;
    }
  }
  int64_t value = 0;
  const auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), value);
  if (ec != std::errc() || end != number.data() + number.size() || value <= 0 ||
      value > INT64_MAX / multiplier) {
    fail("'{}' is not a byte size (e.g. 2147483648, 512MiB, 2GiB)", text);
  }
  return value * multiplier;
}

}  // namespace deferkv::server
