#pragma once
// LongBench's token F1 for QA answers (metrics.py: normalize_answer, f1_score,
// qa_f1_score, normalize_zh_answer, qa_f1_zh_score).
#include <string>
#include <string_view>
#include <vector>

namespace deferkv::eval {

// normalize_answer: lower-case, delete ASCII punctuation, replace the words a/an/the
// (Unicode word boundaries) by a space, collapse whitespace.
std::string normalize_answer(std::string_view text);

// normalize_zh_answer: lower-case, delete ASCII and Chinese punctuation, delete whitespace.
std::string normalize_zh_answer(std::string_view text);

// f1_score: F1 of the multiset overlap of two token lists; 0 when nothing is shared.
double token_f1(const std::vector<std::string>& prediction, const std::vector<std::string>& reference);

double qa_f1(std::string_view prediction, std::string_view reference);
double qa_f1_zh(std::string_view prediction, std::string_view reference);

}  // namespace deferkv::eval
