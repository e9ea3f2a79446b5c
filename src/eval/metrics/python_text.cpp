#include "eval/metrics/python_text.h"

#include <unicode/ucasemap.h>
#include <unicode/utf8.h>

#include <memory>

#include "deferkv/error.h"

namespace deferkv::eval {
namespace {

struct Decoded {
  char32_t code_point;
  size_t length;
};

Decoded decode_at(std::string_view text, size_t pos) {
  const auto* bytes = reinterpret_cast<const uint8_t*>(text.data());
  const auto size = static_cast<int32_t>(text.size());
  auto i = static_cast<int32_t>(pos);
  UChar32 c;
  U8_NEXT(bytes, i, size, c);
  return {static_cast<char32_t>(c < 0 ? 0xFFFD : c), static_cast<size_t>(i) - pos};
}

struct CaseMapDeleter {
  void operator()(UCaseMap* map) const { ucasemap_close(map); }
};

// The root locale: no Turkish or Lithuanian tailoring, as Python's str.lower().
const UCaseMap* root_case_map() {
  static const std::unique_ptr<UCaseMap, CaseMapDeleter> map = [] {
    UErrorCode status = U_ZERO_ERROR;
    UCaseMap* m = ucasemap_open("", 0, &status);
    if (U_FAILURE(status)) fail("ICU case mapping is unavailable: {}", u_errorName(status));
    return std::unique_ptr<UCaseMap, CaseMapDeleter>(m);
  }();
  return map.get();
}

}  // namespace

std::u32string to_code_points(std::string_view utf8) {
  std::u32string out;
  out.reserve(utf8.size());
  for (size_t pos = 0; pos < utf8.size();) {
    const Decoded d = decode_at(utf8, pos);
    out.push_back(d.code_point);
    pos += d.length;
  }
  return out;
}

void append_utf8(std::string& out, char32_t code_point) {
  uint8_t buffer[U8_MAX_LENGTH];
  int32_t length = 0;
  U8_APPEND_UNSAFE(buffer, length, static_cast<UChar32>(code_point));
  out.append(reinterpret_cast<const char*>(buffer), static_cast<size_t>(length));
}

std::string python_lower(std::string_view text) {
  // Full lower-casing can grow a string (U+0130 takes 2 bytes and gives 3).
  std::string out(text.size() + text.size() / 2 + 8, '\0');
  for (int attempt = 0; attempt < 2; ++attempt) {
    UErrorCode status = U_ZERO_ERROR;
    const int32_t length = ucasemap_utf8ToLower(root_case_map(), out.data(),
                                                static_cast<int32_t>(out.size()), text.data(),
                                                static_cast<int32_t>(text.size()), &status);
    if (status == U_BUFFER_OVERFLOW_ERROR) {
      out.resize(static_cast<size_t>(length));
      continue;
    }
    if (U_FAILURE(status)) fail("cannot lower-case text: ICU says {}", u_errorName(status));
    out.resize(static_cast<size_t>(length));
    return out;
  }
  fail("cannot lower-case text: the ICU result does not fit");
}

bool is_python_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 ||
         c == 0x202F || c == 0x205F || c == 0x3000;
}

std::vector<std::string> python_split(std::string_view text) {
  std::vector<std::string> words;
  size_t word_start = std::string_view::npos;
  for (size_t pos = 0; pos < text.size();) {
    const Decoded d = decode_at(text, pos);
    if (is_python_space(d.code_point)) {
      if (word_start != std::string_view::npos) {
        words.emplace_back(text.substr(word_start, pos - word_start));
        word_start = std::string_view::npos;
      }
    } else if (word_start == std::string_view::npos) {
      word_start = pos;
    }
    pos += d.length;
  }
  if (word_start != std::string_view::npos) words.emplace_back(text.substr(word_start));
  return words;
}

std::string collapse_whitespace(std::string_view text) {
  std::string out;
  for (const std::string& word : python_split(text)) {
    if (!out.empty()) out += ' ';
    out += word;
  }
  return out;
}

std::string_view python_strip(std::string_view text) {
  size_t begin = 0;
  while (begin < text.size()) {
    const Decoded d = decode_at(text, begin);
    if (!is_python_space(d.code_point)) break;
    begin += d.length;
  }
  size_t end = begin;  // one past the last non-space character
  for (size_t pos = begin; pos < text.size();) {
    const Decoded d = decode_at(text, pos);
    pos += d.length;
    if (!is_python_space(d.code_point)) end = pos;
  }
  return text.substr(begin, end - begin);
}

std::vector<std::string_view> split_on(std::string_view text, char separator) {
  std::vector<std::string_view> pieces;
  size_t start = 0;
  for (size_t pos; (pos = text.find(separator, start)) != std::string_view::npos; start = pos + 1) {
    pieces.push_back(text.substr(start, pos - start));
  }
  pieces.push_back(text.substr(start));
  return pieces;
}

std::string_view lstrip_chars(std::string_view text, std::string_view characters) {
  const size_t begin = text.find_first_not_of(characters);
  return begin == std::string_view::npos ? std::string_view() : text.substr(begin);
}

}  // namespace deferkv::eval
