#pragma once
// ROUGE-1 F of Google's rouge_score (`RougeScorer(['rouge1'], use_stemmer=True)`), the
// Needle-in-a-Haystack score of the KV-compression code bases.
#include <string>
#include <string_view>
#include <vector>

namespace deferkv::eval {

// rouge_score's tokenizer: str.lower(), every run of characters outside [a-z0-9] becomes
// a space, split, Porter-stem the tokens longer than 3 characters, drop empty tokens.
std::vector<std::string> rouge_score_tokens(std::string_view text);

// Unigram F-measure on token counts (no epsilon; 0 when nothing is shared).
double rouge_1(std::string_view prediction, std::string_view reference);

}  // namespace deferkv::eval
