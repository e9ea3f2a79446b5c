#include "eval/tasks/template_text.h"

#include <algorithm>

#include "deferkv/error.h"

namespace deferkv::eval {
namespace {

// Bytes of the whitespace character starting at text[i] (Python's str.isspace), or 0.
size_t whitespace_length(std::string_view text, size_t i) {
  const auto byte = [&](size_t k) { return k < text.size() ? static_cast<unsigned char>(text[k]) : 0u; };
  const unsigned c = byte(i);
  if (c == ' ' || (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x1f)) return 1;
  if (c == 0xc2 && (byte(i + 1) == 0x85 || byte(i + 1) == 0xa0)) return 2;  // U+0085, U+00A0
  if (c == 0xe1 && byte(i + 1) == 0x9a && byte(i + 2) == 0x80) return 3;    // U+1680
  if (c == 0xe2 && byte(i + 1) == 0x80) {
    const unsigned d = byte(i + 2);
    if ((d >= 0x80 && d <= 0x8a) || d == 0xa8 || d == 0xa9 || d == 0xaf) return 3;  // U+2000-200A, 2028, 2029, 202F
  }
  if (c == 0xe2 && byte(i + 1) == 0x81 && byte(i + 2) == 0x9f) return 3;  // U+205F
  if (c == 0xe3 && byte(i + 1) == 0x80 && byte(i + 2) == 0x80) return 3;  // U+3000
  return 0;
}

// Bytes of the whitespace character ending just before text[end], or 0.
size_t whitespace_length_before(std::string_view text, size_t end) {
  for (size_t n = 1; n <= 3 && n <= end; ++n) {
    if (whitespace_length(text, end - n) == n) return n;
  }
  return 0;
}

}  // namespace

std::string fill_template(std::string_view text,
                          const std::vector<std::pair<std::string_view, std::string_view>>& fields) {
  std::string out;
  size_t i = 0;
  while (i < text.size()) {
    const size_t open = text.find('{', i);
    if (open == std::string_view::npos) break;
    const size_t close = text.find('}', open);
    if (close == std::string_view::npos) fail("unclosed '{{' in template: {}", text);
    const std::string_view name = text.substr(open + 1, close - open - 1);
    const auto it = std::find_if(fields.begin(), fields.end(), [&](const auto& f) { return f.first == name; });
    if (it == fields.end()) fail("template field '{{{}}}' has no value", name);
    out.append(text.substr(i, open - i));
    out.append(it->second);
    i = close + 1;
  }
  out.append(text.substr(std::min(i, text.size())));
  return out;
}

FilledTemplate fill_template_until(std::string_view text,
                                   const std::vector<std::pair<std::string_view, std::string_view>>& fields,
                                   std::string_view field) {
  const std::string placeholder = "{" + std::string(field) + "}";
  const size_t at = text.rfind(placeholder);
  if (at == std::string_view::npos) fail("internal: the template has no {}", placeholder);
  // One pass, left to right: the rest of the template fills to the rest of the text.
  FilledTemplate out{fill_template(text, fields), 0};
  out.field_end = out.text.size() - fill_template(text.substr(at + placeholder.size()), fields).size();
  return out;
}

std::string replace_all(std::string_view text, std::string_view from, std::string_view to) {
  std::string out;
  size_t i = 0;
  for (size_t hit; (hit = text.find(from, i)) != std::string_view::npos; i = hit + from.size()) {
    out.append(text.substr(i, hit - i));
    out.append(to);
  }
  out.append(text.substr(i));
  return out;
}

std::vector<std::string> split_on_whitespace_runs(std::string_view text) {
  std::vector<std::string> words(1);
  for (size_t i = 0; i < text.size();) {
    size_t n = whitespace_length(text, i);
    if (n == 0) {
      words.back().push_back(text[i++]);
      continue;
    }
    while (n > 0) {
      i += n;
      n = whitespace_length(text, i);
    }
    words.emplace_back();
  }
  return words;
}

std::string join(const std::vector<std::string>& items, std::string_view separator, size_t begin, size_t end) {
  std::string out;
  for (size_t i = begin; i < end; ++i) {
    if (i > begin) out.append(separator);
    out.append(items[i]);
  }
  return out;
}

std::string join(const std::vector<std::string>& items, std::string_view separator) {
  return join(items, separator, 0, items.size());
}

std::string_view strip(std::string_view text) {
  size_t begin = 0, end = text.size();
  while (begin < end) {
    const size_t n = whitespace_length(text, begin);
    if (n == 0) break;
    begin += n;
  }
  while (end > begin) {
    const size_t n = whitespace_length_before(text, end);
    if (n == 0) break;
    end -= n;
  }
  return text.substr(begin, end - begin);
}

}  // namespace deferkv::eval
