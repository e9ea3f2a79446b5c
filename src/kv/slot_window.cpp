#include "kv/slot_window.h"

#include <algorithm>
#include <cstring>

namespace deferkv {

SlotWindow::SlotWindow(const std::vector<int64_t>& item_bytes, int64_t slots) : item_bytes_(item_bytes), slots_(slots) {
  for (int64_t bytes : item_bytes) buffers_.emplace_back(static_cast<size_t>(slots * bytes));
}

int64_t SlotWindow::total_item_bytes() const {
  int64_t total = 0;
  for (int64_t bytes : item_bytes_) total += bytes;
  return total;
}

int64_t SlotWindow::resident_bytes() const {
  int64_t total = 0;
  for (const ReservedBuffer& b : buffers_) total += static_cast<int64_t>(b.resident_bytes());
  return total;
}

void SlotWindow::move(int64_t from, int64_t to, int64_t count) {
  if (from == to || count == 0) return;
  for (size_t b = 0; b < buffers_.size(); ++b) {
    std::memmove(at(b, to), at(b, from), static_cast<size_t>(count * item_bytes_[b]));
  }
}

void SlotWindow::make_room(int64_t n) {
  if (start_ + count_ + n <= slots_) return;
  move(0, -start_, count_);  // to slot 0
  start_ = 0;
  unused_from_ = 0;
  shrink(count_);  // the slots the window left behind
}

void SlotWindow::grow(int64_t n) {
  count_ += n;
  touched_ = std::max(touched_, start_ + count_);
}

void SlotWindow::shrink(int64_t count) {
  count_ = count;
  const int64_t end = start_ + count;
  if ((touched_ - end) * total_item_bytes() < kReleaseBatchBytes) return;
  for (size_t b = 0; b < buffers_.size(); ++b) {
    const auto bytes = static_cast<size_t>(item_bytes_[b]);
    buffers_[b].release_after(static_cast<size_t>(end) * bytes, static_cast<size_t>(touched_) * bytes);
  }
  touched_ = end;
}

void SlotWindow::release_before_window() {
  if ((start_ - unused_from_) * total_item_bytes() < kReleaseBatchBytes) return;
  for (size_t b = 0; b < buffers_.size(); ++b) {
    const auto bytes = static_cast<size_t>(item_bytes_[b]);
    buffers_[b].release_before(static_cast<size_t>(unused_from_) * bytes, static_cast<size_t>(start_) * bytes);
  }
  unused_from_ = start_;
}

void SlotWindow::reset() {
  start_ = 0;  // the slots before the old window become the tail, released by the next shrink
  unused_from_ = 0;
  count_ = 0;
}

void SlotWindow::drop(const std::vector<int32_t>& dropped) {
  const auto n = static_cast<int64_t>(dropped.size());
  if (n == 0) return;
  const auto at_k = [&](int64_t k) { return static_cast<int64_t>(dropped[static_cast<size_t>(k)]); };
  const int64_t after_first = count_ - at_k(0) - n;  // kept items after the first dropped
  const int64_t before_last = at_k(n - 1) - (n - 1);  // kept items before the last dropped
  if (after_first <= before_last) {
    // The items between dropped k and dropped k + 1 move forward by k + 1, in order, so
    // none overwrites an item still to be moved.
    for (int64_t k = 0; k < n; ++k) {
      const int64_t from = at_k(k) + 1;
      const int64_t end = k + 1 < n ? at_k(k + 1) : count_;
      move(from, from - (k + 1), end - from);
    }
    shrink(count_ - n);
  } else {
    // The items between dropped k - 1 and dropped k move back by n - k, the last run
    // first; then the window starts n slots later.
    for (int64_t k = n - 1; k >= 0; --k) {
      const int64_t from = k > 0 ? at_k(k - 1) + 1 : 0;
      move(from, from + (n - k), at_k(k) - from);
    }
    start_ += n;
    count_ -= n;
    release_before_window();
  }
}

}  // namespace deferkv
