#pragma once
// LongBench's classification_score (trec, lsht).
#include <string>
#include <string_view>
#include <vector>

namespace deferkv::eval {

// The class names found in the prediction (case-sensitive substrings), less those that
// are part of the ground truth without being it, removed as the official loop does: it
// deletes from the list it is iterating over, so the entry after each deleted one is
// never looked at. 1/len(matches) if the ground truth is among them, else 0.
double classification(std::string_view prediction, std::string_view ground_truth,
                      const std::vector<std::string>& all_classes);

}  // namespace deferkv::eval
