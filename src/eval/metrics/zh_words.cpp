#include "eval/metrics/zh_words.h"

#include "eval/metrics/python_text.h"

namespace deferkv::eval {
namespace {

bool is_ascii_alnum(char32_t c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

}  // namespace

std::vector<std::string> zh_words(std::string_view text) {
  std::vector<std::string> words;
  bool in_ascii_run = false;
  for (char32_t c : to_code_points(text)) {
    const bool alnum = is_ascii_alnum(c);
    if (!(alnum && in_ascii_run)) words.emplace_back();
    append_utf8(words.back(), c);
    in_ascii_run = alnum;
  }
  return words;
}

}  // namespace deferkv::eval
