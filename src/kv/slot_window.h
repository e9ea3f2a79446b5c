#pragma once
// Items of equal size held contiguous, in order, in a window of slots that can start
// anywhere in storage reserved for twice the most items held (KvCache keeps a head's key
// and value rows in one window and its entries' positions in another).
//
// Dropping items closes the gaps by moving whichever side of them is shorter: the items
// after the first dropped forward, or those before the last dropped back (the window's
// start then advances). A window that reaches the end of its storage moves back to slot 0
// at the next append: at most one item moved per item dropped before, however long the
// run.
//
// The OS commits the storage page by page as items arrive; the pages a shrinking window
// leaves, after or before it, go back in batches of kReleaseBatchBytes (over all the
// window's buffers), not at every shrink: a per-step press that drops one item and appends
// one would otherwise release a page and fault it in again at every step whenever the
// window's end sat at a page boundary (what that cost: bench/README.md, "Per-step eviction").
#include <cstddef>
#include <cstdint>
#include <vector>

#include "base/reserved_buffer.h"

namespace deferkv {

class SlotWindow {
 public:
  static constexpr int64_t kReleaseBatchBytes = 32 << 10;

  SlotWindow() = default;
  // One buffer per entry of item_bytes (an item's bytes in that buffer), each of `slots` slots.
  SlotWindow(const std::vector<int64_t>& item_bytes, int64_t slots);

  int64_t count() const { return count_; }
  // Item i of buffer b (i counts from the window's start; i == count() is where the next goes).
  uint8_t* at(size_t b, int64_t i) {
    return reinterpret_cast<uint8_t*>(buffers_[b].data()) + (start_ + i) * item_bytes_[b];
  }
  const uint8_t* at(size_t b, int64_t i) const {
    return reinterpret_cast<const uint8_t*>(buffers_[b].data()) + (start_ + i) * item_bytes_[b];
  }

  // Makes room for n more items after the window (moving it to slot 0 if needed); then
  // write them at at(b, count()) and call grow(n).
  void make_room(int64_t n);
  void grow(int64_t n);
  // Drops the items at `dropped` (strictly increasing, each < count()).
  void drop(const std::vector<int32_t>& dropped);
  // Keeps the first `count` items (count <= count()).
  void shrink(int64_t count);
  // Empties the window and puts it at slot 0; the pages it held go back by the next
  // shrink(), after the caller has written and grown it again.
  void reset();

  int64_t resident_bytes() const;

 private:
  int64_t total_item_bytes() const;
  // Moves `count` items from index `from` to index `to` (either way).
  void move(int64_t from, int64_t to, int64_t count);
  void release_before_window();

  std::vector<ReservedBuffer> buffers_;
  std::vector<int64_t> item_bytes_;
  int64_t slots_ = 0;
  int64_t start_ = 0;
  int64_t count_ = 0;
  int64_t touched_ = 0;      // the highest slot end used since the tail's pages were last released
  int64_t unused_from_ = 0;  // the slots below it before the window were released already
};

}  // namespace deferkv
