#pragma once
// The environment settings that pick a form of the same work (DEFERKV_WEIGHT_MEMORY,
// DEFERKV_MAX_SIMD, ...): each value is one of a few names, read without regard to case,
// and anything else is an error that names the variable, the value and the names it takes.
#include <span>
#include <string>
#include <string_view>

#include "deferkv/error.h"

namespace deferkv {

template <class Value>
struct SettingName {
  std::string_view name;  // lower case
  Value value;
};

std::string ascii_lower(std::string_view text);

// `names` joined by ", ".
template <class Value>
std::string setting_names(std::span<const SettingName<Value>> names) {
  std::string joined;
  for (const auto& n : names) joined += (joined.empty() ? "" : ", ") + std::string(n.name);
  return joined;
}

// The value `text` names, or an Error "<variable>='<text>' is not <what> (known: ...)".
template <class Value>
Value parse_setting(std::string_view variable, std::string_view text, std::string_view what,
                    std::span<const SettingName<Value>> names) {
  const std::string lower = ascii_lower(text);
  for (const auto& n : names) {
    if (lower == n.name) return n.value;
  }
  fail("{}='{}' is not {} (known: {})", variable, text, what, setting_names(names));
}

}  // namespace deferkv
