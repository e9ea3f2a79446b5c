#pragma once
// UTF-8 scanning for the tokenizer: walking characters, repairing invalid input and
// telling an unfinished character at the end of a byte stream from a broken one.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace deferkv {

// What starts at a position of a byte string.
struct Utf8Unit {
  enum Status : uint8_t { kValid, kInvalid, kTruncated };
  Status status;
  // kValid: the character's length. kInvalid: the length of the maximal ill-formed
  // subpart (Unicode 15, 3.9 "U+FFFD substitution of maximal subparts"), at least 1.
  // kTruncated: the bytes left, a valid start of a character cut off by the end.
  size_t length;
};

Utf8Unit scan_utf8(std::string_view text, size_t pos);

// Length of the character whose first byte is `lead`, for text known to be valid.
inline size_t utf8_length(uint8_t lead) {
  return lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
}

// The tokenizer's rule for invalid UTF-8: each maximal ill-formed subpart becomes one
// U+FFFD, as Python's `bytes.decode(errors="replace")` and WHATWG do. A truncated
// character at the end counts as ill-formed too.
std::string repair_utf8(std::string_view text);

inline constexpr std::string_view kReplacementChar = "\xEF\xBF\xBD";  // U+FFFD

}  // namespace deferkv
