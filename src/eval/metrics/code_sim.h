#pragma once
// LongBench's code_sim_score (lcc, repobench-p): fuzzywuzzy's fuzz.ratio between the
// first code line of the prediction and the reference line, over 100.
//
// fuzz.ratio is taken with its python-Levenshtein backend (the one LongBench's
// requirements install): round(100 · ratio), ratio = (|a| + |b| − indel distance) /
// (|a| + |b|) over code points, rounded half to even; 100 for equal strings, 0 when
// one is empty. Without python-Levenshtein, fuzzywuzzy falls back to difflib's
// SequenceMatcher, which differs on some inputs (lcc 67.16 vs 66.22 on one test set).
#include <string>
#include <string_view>

namespace deferkv::eval {

// The first line of prediction.lstrip('\n') with no backtick, '#' or '//'; "" if none.
// Lines are split on '\n' only, so a trailing '\r' stays.
std::string_view first_code_line(std::string_view prediction);

// Indel distance: the fewest insertions and deletions (a substitution costs 2).
size_t indel_distance(std::u32string_view a, std::u32string_view b);

// fuzz.ratio with the python-Levenshtein backend, 0..100.
int fuzz_ratio(std::string_view a, std::string_view b);

double code_sim(std::string_view prediction, std::string_view reference);

}  // namespace deferkv::eval
