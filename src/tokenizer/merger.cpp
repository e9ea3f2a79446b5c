#include "tokenizer/merger.h"

#include <algorithm>

namespace deferkv {

void Merger::consider(const MergeTable& table, const std::vector<MergeSymbol>& symbols,
                      int32_t left) {
  const int32_t right = symbols[left].next;
  if (right < 0) return;
  const int32_t a = symbols[left].id, b = symbols[right].id;
  if (a < 0 || b < 0) return;
  const MergeTable::Merge* merge = table.find(a, b);
  if (merge == nullptr) return;
  heap_.push_back({merge->priority, left, a, b, merge->result});
}

void Merger::run(const MergeTable& table, std::vector<MergeSymbol>& symbols) {
  const auto n = static_cast<int32_t>(symbols.size());
  for (int32_t i = 0; i < n; ++i) {
    symbols[i].prev = i - 1;
    symbols[i].next = i + 1 < n ? i + 1 : -1;
  }
  if (n < 2) return;
  // Heap order: the best priority on top, then the leftmost.
  const auto cmp = [](const Candidate& x, const Candidate& y) {
    return x.priority < y.priority || (x.priority == y.priority && x.left > y.left);
  };
  heap_.clear();
  for (int32_t i = 0; i + 1 < n; ++i) consider(table, symbols, i);
  std::make_heap(heap_.begin(), heap_.end(), cmp);
  while (!heap_.empty()) {
    std::pop_heap(heap_.begin(), heap_.end(), cmp);
    const Candidate top = heap_.back();
    heap_.pop_back();
    // A candidate is stale when either symbol has changed since it was pushed: a merge
    // always changes the left symbol's id and removes the right one.
    MergeSymbol& left = symbols[top.left];
    if (left.length == 0 || left.id != top.left_id || left.next < 0) continue;
    MergeSymbol& right = symbols[left.next];
    if (right.id != top.right_id) continue;
    left.id = top.result;
    left.length += right.length;
    right.length = 0;
    left.next = right.next;
    if (left.next >= 0) symbols[left.next].prev = top.left;
    const size_t before = heap_.size();
    if (left.prev >= 0) consider(table, symbols, left.prev);
    consider(table, symbols, top.left);
    for (size_t i = before; i < heap_.size(); ++i) {
      std::push_heap(heap_.begin(), heap_.begin() + static_cast<std::ptrdiff_t>(i) + 1, cmp);
    }
  }
}

}  // namespace deferkv
