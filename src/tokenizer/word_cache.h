#pragma once
// The ids of words already merged during one encode() call. Long texts repeat their
// words many times and merging is the costly step, so each distinct word is merged once.
// The words are views into the text being encoded: a cache lives no longer than it.
#include <cstdint>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace deferkv {

class WordCache {
 public:
  // Appends the ids of `word` to `out` and returns true when it is cached.
  bool append(std::string_view word, std::vector<int32_t>& out) const {
    const auto it = spans_.find(word);
    if (it == spans_.end()) return false;
    out.insert(out.end(), ids_.begin() + it->second.first,
               ids_.begin() + it->second.first + it->second.second);
    return true;
  }

  // Caches the ids `out` holds from index `first` on as those of `word`.
  void add(std::string_view word, const std::vector<int32_t>& out, size_t first) {
    spans_.emplace(word, std::make_pair(ids_.size(), out.size() - first));
    ids_.insert(ids_.end(), out.begin() + static_cast<std::ptrdiff_t>(first), out.end());
  }

 private:
  std::unordered_map<std::string_view, std::pair<size_t, size_t>> spans_;  // word -> (first, count)
  std::vector<int32_t> ids_;
};

}  // namespace deferkv
