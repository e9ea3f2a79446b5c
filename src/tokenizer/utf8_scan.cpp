#include "tokenizer/utf8_scan.h"

#include "base/utf8.h"

namespace deferkv {
namespace {

// Allowed range of the second byte for a lead byte (Unicode Table 3-7); later
// continuation bytes are always 80..BF.
struct SecondByteRange {
  uint8_t lo, hi;
};

SecondByteRange second_byte_range(uint8_t lead) {
  switch (lead) {
    case 0xE0:
      return {0xA0, 0xBF};  // no overlongs
    case 0xED:
      return {0x80, 0x9F};  // no surrogates
    case 0xF0:
      return {0x90, 0xBF};  // no overlongs
    case 0xF4:
      return {0x80, 0x8F};  // nothing above U+10FFFF
    default:
      return {0x80, 0xBF};
  }
}

}  // namespace

Utf8Unit scan_utf8(std::string_view text, size_t pos) {
  const auto lead = static_cast<uint8_t>(text[pos]);
  if (lead < 0x80) return {Utf8Unit::kValid, 1};
  size_t need;
  if (lead >= 0xC2 && lead <= 0xDF) {
    need = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    need = 3;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    need = 4;
  } else {
    return {Utf8Unit::kInvalid, 1};
  }
  const SecondByteRange second = second_byte_range(lead);
  size_t k = 1;
  while (k < need && pos + k < text.size()) {
    const auto c = static_cast<uint8_t>(text[pos + k]);
    const bool ok = k == 1 ? (c >= second.lo && c <= second.hi) : (c >= 0x80 && c <= 0xBF);
    if (!ok) return {Utf8Unit::kInvalid, k};
    ++k;
  }
  if (k == need) return {Utf8Unit::kValid, need};
  return {Utf8Unit::kTruncated, k};
}

std::string repair_utf8(std::string_view text) {
  if (is_valid_utf8(text)) return std::string(text);
  std::string out;
  out.reserve(text.size() + 8);
  size_t pos = 0;
  while (pos < text.size()) {
    const Utf8Unit unit = scan_utf8(text, pos);
    if (unit.status == Utf8Unit::kValid) {
      out.append(text.substr(pos, unit.length));
    } else {
      out.append(kReplacementChar);
    }
    pos += unit.length;
  }
  return out;
}

}  // namespace deferkv
