#include "tokenizer/byte_level.h"

#include <unordered_map>

#include "tokenizer/utf8_scan.h"

namespace deferkv {
namespace {

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

// Bytes that are printable Latin-1 ('!'..'~', '¡'..'¬', '®'..'ÿ') stand for themselves;
// the other 68 take the code points 256, 257, ... in byte order.
std::array<uint32_t, 256> byte_code_points() {
  std::array<uint32_t, 256> cps{};
  uint32_t next = 256;
  for (uint32_t b = 0; b < 256; ++b) {
    const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    cps[b] = printable ? b : next++;
  }
  return cps;
}

const std::unordered_map<std::string, uint8_t>& char_to_byte() {
  static const auto map = [] {
    std::unordered_map<std::string, uint8_t> m;
    for (int b = 0; b < 256; ++b) m[byte_level_chars()[b]] = static_cast<uint8_t>(b);
    return m;
  }();
  return map;
}

}  // namespace

const std::array<std::string, 256>& byte_level_chars() {
  static const auto chars = [] {
    std::array<std::string, 256> out;
    const auto cps = byte_code_points();
    for (int b = 0; b < 256; ++b) append_utf8(out[b], cps[b]);
    return out;
  }();
  return chars;
}

std::string byte_level_encode(std::string_view bytes) {
  const auto& chars = byte_level_chars();
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) out += chars[static_cast<uint8_t>(c)];
  return out;
}

bool byte_level_decode(std::string_view text, std::string& out) {
  const auto& map = char_to_byte();
  out.clear();
  size_t pos = 0;
  while (pos < text.size()) {
    const Utf8Unit unit = scan_utf8(text, pos);
    if (unit.status != Utf8Unit::kValid) return false;
    const auto it = map.find(std::string(text.substr(pos, unit.length)));
    if (it == map.end()) return false;
    out += static_cast<char>(it->second);
    pos += unit.length;
  }
  return true;
}

}  // namespace deferkv
