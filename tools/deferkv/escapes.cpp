#include "escapes.h"

#include <cctype>

namespace deferkv::cli {
namespace {

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  const char lower = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return lower >= 'a' && lower <= 'f' ? lower - 'a' + 10 : -1;
}

}  // namespace

std::string process_escapes(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '\\' || i + 1 == text.size()) {
      out += text[i];
      continue;
    }
    const char next = text[i + 1];
    switch (next) {
      case 'n': out += '\n'; break;
      case 'r': out += '\r'; break;
      case 't': out += '\t'; break;
      case '\'': out += '\''; break;
      case '"': out += '"'; break;
      case '\\': out += '\\'; break;
      case 'x':
        if (i + 3 < text.size() && hex_value(text[i + 2]) >= 0 && hex_value(text[i + 3]) >= 0) {
          out += static_cast<char>(hex_value(text[i + 2]) * 16 + hex_value(text[i + 3]));
          i += 2;
          break;
        }
        out += "\\x";
        break;
      default: out += '\\'; out += next; break;
    }
    ++i;
  }
  return out;
}

}  // namespace deferkv::cli
