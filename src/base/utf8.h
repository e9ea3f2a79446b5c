#pragma once
#include <string_view>

namespace deferkv {

// True when `text` is well-formed UTF-8 (no overlongs, no surrogates, <= U+10FFFF).
bool is_valid_utf8(std::string_view text);

}  // namespace deferkv
