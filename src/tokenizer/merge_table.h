#pragma once
// Which two adjacent tokens merge into which, and how early: an open-addressing hash
// table keyed by the token pair, because BPE looks pairs up millions of times.
#include <cstddef>
#include <cstdint>
#include <vector>

namespace deferkv {

class MergeTable {
 public:
  struct Merge {
    float priority;  // higher merges first: -rank for ranked merges, the score for SentencePiece
    int32_t result;
  };

  // Makes room for `n` pairs at once (growing pair by pair rehashes many times).
  void reserve(size_t n);
  // A pair added twice keeps its first merge (the better rank).
  void add(int32_t left, int32_t right, Merge merge);

  const Merge* find(int32_t left, int32_t right) const {
    if (slots_.empty()) return nullptr;
    const uint64_t key = pack(left, right);
    for (uint64_t i = hash(key);; i = (i + 1) & mask_) {
      const Slot& slot = slots_[i];
      if (slot.key == key) return &slot.merge;
      if (slot.key == kEmpty) return nullptr;
    }
  }

  size_t size() const { return size_; }

 private:
  struct Slot {
    uint64_t key;
    Merge merge;
  };
  static constexpr uint64_t kEmpty = ~uint64_t{0};  // the pair (-1, -1), never added

  static uint64_t pack(int32_t left, int32_t right) {
    return (uint64_t{static_cast<uint32_t>(left)} << 32) | static_cast<uint32_t>(right);
  }
  uint64_t hash(uint64_t key) const { return (key * 0x9E3779B97F4A7C15ull) >> shift_; }
  void rehash(size_t capacity);

  std::vector<Slot> slots_;
  size_t size_ = 0;
  uint64_t mask_ = 0;
  int shift_ = 64;
};

}  // namespace deferkv
