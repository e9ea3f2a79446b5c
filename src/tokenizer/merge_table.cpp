#include "tokenizer/merge_table.h"

namespace deferkv {

void MergeTable::reserve(size_t n) {
  size_t capacity = 1024;
  while (capacity < 2 * n) capacity *= 2;
  if (capacity > slots_.size()) rehash(capacity);
}

void MergeTable::add(int32_t left, int32_t right, Merge merge) {
  // Keep the load at most one half.
  if ((size_ + 1) * 2 > slots_.size()) rehash(slots_.empty() ? 1024 : slots_.size() * 2);
  const uint64_t key = pack(left, right);
  for (uint64_t i = hash(key);; i = (i + 1) & mask_) {
    Slot& slot = slots_[i];
    if (slot.key == key) return;
    if (slot.key == kEmpty) {
      slot = {key, merge};
      ++size_;
      return;
    }
  }
}

void MergeTable::rehash(size_t capacity) {
  std::vector<Slot> old = std::move(slots_);
  slots_.assign(capacity, Slot{kEmpty, {0.0f, -1}});
  mask_ = capacity - 1;
  shift_ = 64 - __builtin_ctzll(capacity);
  size_ = 0;
  for (const Slot& slot : old) {
    if (slot.key == kEmpty) continue;
    for (uint64_t i = hash(slot.key);; i = (i + 1) & mask_) {
      if (slots_[i].key == kEmpty) {
        slots_[i] = slot;
        ++size_;
        break;
      }
    }
  }
}

}  // namespace deferkv
