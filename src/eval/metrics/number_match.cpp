#include "eval/metrics/number_match.h"

#include "deferkv/error.h"
#include "eval/metrics/unicode_regex.h"

namespace deferkv::eval {
namespace {

double share_equal_to(std::string_view prediction, std::string_view wanted) {
  static const UnicodeRegex kNumber(R"(\d+)");
  const auto numbers = kNumber.find_all(prediction);
  if (numbers.empty()) return 0.0;
  size_t right = 0;
  for (std::string_view number : numbers) right += number == wanted ? 1 : 0;
  return static_cast<double>(right) / static_cast<double>(numbers.size());
}

double paragraph_match(std::string_view prediction, std::string_view answer,
                       const UnicodeRegex& paragraph, std::string_view label) {
  const auto ids = paragraph.find_all(answer);
  if (ids.empty()) fail("retrieval answer '{}' names no '{}N'", answer, label);
  return share_equal_to(prediction, ids.front());
}

}  // namespace

double count_match(std::string_view prediction, std::string_view answer) {
  return share_equal_to(prediction, answer);
}

double retrieval(std::string_view prediction, std::string_view answer) {
  static const UnicodeRegex kParagraph(R"(Paragraph (\d+))");
  return paragraph_match(prediction, answer, kParagraph, "Paragraph ");
}

double retrieval_zh(std::string_view prediction, std::string_view answer) {
  static const UnicodeRegex kParagraph(R"(段落(\d+))");
  return paragraph_match(prediction, answer, kParagraph, "段落");
}

}  // namespace deferkv::eval
