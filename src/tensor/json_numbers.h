#pragma once
// Numbers read from JSON files a user hands us. nlohmann's get<int64_t>() of a float such as
// 3e94 converts it out of range (undefined behaviour, found by fuzz_compresskv_profile), and
// a JSON number such as 1e400 parses as infinity: readers take their numbers through these
// and refuse, by name, what they return nothing for.
#include <cmath>
#include <cstdint>
#include <optional>

#include <nlohmann/json.hpp>

namespace deferkv {

// An integer of the file that fits in 64 bits (1e3 written as a float is not one).
template <typename Json>
std::optional<int64_t> json_whole_number(const Json& value) {
  if (value.is_number_unsigned()) {
    const uint64_t v = value.template get<uint64_t>();
    if (v <= static_cast<uint64_t>(INT64_MAX)) return static_cast<int64_t>(v);
    return std::nullopt;
  }
  if (value.is_number_integer()) return value.template get<int64_t>();
  return std::nullopt;
}

// Any finite number (integers included).
template <typename Json>
std::optional<double> json_finite_number(const Json& value) {
  if (!value.is_number()) return std::nullopt;
  const double v = value.template get<double>();
  if (!std::isfinite(v)) return std::nullopt;
  return v;
}

}  // namespace deferkv
