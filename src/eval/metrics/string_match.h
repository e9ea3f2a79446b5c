#pragma once
// RULER's scoring (NVIDIA/RULER@c3f5e3b scripts/eval/evaluate.py postprocess_pred and
// scripts/eval/synthetic/constants.py string_match_all / string_match_part).
#include <string>
#include <string_view>
#include <vector>

namespace deferkv::eval {

// strip(), every control character U+0000..U+001F replaced by '\n', strip() again.
std::string ruler_postprocess(std::string_view prediction);

// Whether `reference` occurs in `prediction` after both are lower-cased (str.lower(), no
// case folding, no whitespace normalisation); an empty reference always occurs.
bool contains_ignoring_case(std::string_view prediction, std::string_view reference);

// The share of the references that occur in the prediction.
double string_match_all(std::string_view prediction, const std::vector<std::string>& references);

// 1 if any reference occurs in the prediction, else 0.
double string_match_part(std::string_view prediction, const std::vector<std::string>& references);

}  // namespace deferkv::eval
