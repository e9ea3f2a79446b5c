#pragma once
// The few Python string operations the RULER and NIAH generators are written with,
// done the same way here so prompts come out byte for byte as the reference scripts
// write them.
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace deferkv::eval {

// str.format with named fields: every "{name}" is replaced in one pass (text that a
// field brings in is not searched again); a name not given is an error.
std::string fill_template(std::string_view text,
                          const std::vector<std::pair<std::string_view, std::string_view>>& fields);

// fill_template, and where the text that `field` brought in ends (its last "{field}"):
// with the task's context field, where question-agnostic mode splits the prompt.
struct FilledTemplate {
  std::string text;
  size_t field_end = 0;
};
FilledTemplate fill_template_until(std::string_view text,
                                   const std::vector<std::pair<std::string_view, std::string_view>>& fields,
                                   std::string_view field);

// str.replace: every occurrence, left to right, without overlaps.
std::string replace_all(std::string_view text, std::string_view from, std::string_view to);

// re.sub(r'\s+', ' ', text).split(' '): the words between runs of whitespace, with an
// empty first or last word when the text starts or ends with whitespace. Whitespace is
// Python's \s for str patterns (ASCII whitespace, \x1c-\x1f, U+0085, U+00A0, the Unicode
// spaces and separators).
std::vector<std::string> split_on_whitespace_runs(std::string_view text);

// " ".join(items[begin:end]).
std::string join(const std::vector<std::string>& items, std::string_view separator, size_t begin, size_t end);
std::string join(const std::vector<std::string>& items, std::string_view separator);

// Python's str.strip(): ASCII and Unicode whitespace off both ends.
std::string_view strip(std::string_view text);

}  // namespace deferkv::eval
