#pragma once
// LongBench's count_score (passage_count) and retrieval_score / retrieval_zh_score
// (passage_retrieval_en/zh): the share of the numbers in the prediction that equal the
// answer. Numbers are Python's `\d+`, so runs of any Unicode decimal digits (Arabic-
// Indic, full-width, …) count as numbers too; they never equal an ASCII answer.
#include <string_view>

namespace deferkv::eval {

double count_match(std::string_view prediction, std::string_view answer);

// The answer names its paragraph ("Paragraph 12" / "段落12"); error if it names none
// (the official code raises IndexError there).
double retrieval(std::string_view prediction, std::string_view answer);
double retrieval_zh(std::string_view prediction, std::string_view answer);

}  // namespace deferkv::eval
