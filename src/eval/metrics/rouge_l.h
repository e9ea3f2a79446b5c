#pragma once
// ROUGE-L F as LongBench computes it: `Rouge().get_scores([pred], [ref], avg=True)
// ["rouge-l"]["f"]` of the pip package `rouge` 1.0.1 (pltrdy/rouge@c1b90a7), the
// summary-level LCS with its set semantics, and 0 whenever that code raises.
#include <string_view>

namespace deferkv::eval {

double rouge_l(std::string_view prediction, std::string_view reference);

// rouge_zh_score: rouge_l of the texts' words (zh_words.h) joined by spaces.
double rouge_l_zh(std::string_view prediction, std::string_view reference);

}  // namespace deferkv::eval
