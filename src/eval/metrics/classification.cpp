#include "eval/metrics/classification.h"

#include <algorithm>

namespace deferkv::eval {

double classification(std::string_view prediction, std::string_view ground_truth,
                      const std::vector<std::string>& all_classes) {
  std::vector<std::string_view> matches;
  for (const std::string& name : all_classes) {
    if (prediction.find(name) != std::string_view::npos) matches.push_back(name);
  }
  // Python's `for x in list: list.remove(x)`: the iterator is an index that moves on
  // after each step, and remove() deletes the first equal entry (which, for a list
  // without repeats, is the current one). So after a deletion the index skips an entry.
  for (size_t index = 0; index < matches.size(); ++index) {
    const std::string_view term = matches[index];
    if (ground_truth.find(term) != std::string_view::npos && term != ground_truth) {
      matches.erase(std::find(matches.begin(), matches.end(), term));
    }
  }
  if (std::find(matches.begin(), matches.end(), ground_truth) == matches.end()) return 0.0;
  return 1.0 / static_cast<double>(matches.size());
}

}  // namespace deferkv::eval
