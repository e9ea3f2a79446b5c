#pragma once
// Anonymous memory reserved up front but committed by the OS only as pages are
// touched. release_after() hands the pages of a no longer used tail back to the OS, and
// release_before() those of a no longer used head, while keeping the reservation, so a
// buffer whose used range shrinks frees real memory (resident bytes drop) and can grow
// again without moving its data.
#include <cstddef>

namespace deferkv {

class ReservedBuffer {
 public:
  ReservedBuffer() = default;
  explicit ReservedBuffer(size_t capacity_bytes);
  ~ReservedBuffer();
  ReservedBuffer(ReservedBuffer&& other) noexcept;
  ReservedBuffer& operator=(ReservedBuffer&& other) noexcept;
  ReservedBuffer(const ReservedBuffer&) = delete;
  ReservedBuffer& operator=(const ReservedBuffer&) = delete;

  std::byte* data() { return data_; }
  const std::byte* data() const { return data_; }
  size_t capacity() const { return capacity_; }

  // The bytes [used, was_used) are no longer needed: returns the pages that lie wholly
  // past `used` (up to the page holding was_used - 1) to the OS; their contents become
  // zero. Nothing happens when no whole page is freed. Each call that frees pages costs
  // a TLB flush on every core, which is why the range is bounded by what was used.
  void release_after(size_t used, size_t was_used);
  // Everything before byte `used_from` is no longer needed, and the bytes from `unused_from`
  // on were given back before: returns the whole pages of [unused_from, used_from) (the
  // page holding used_from stays). The same TLB flush per call that frees pages.
  void release_before(size_t unused_from, size_t used_from);
  // Bytes of the buffer the OS currently backs with memory (mincore).
  size_t resident_bytes() const;

 private:
  std::byte* data_ = nullptr;
  size_t capacity_ = 0;
};

}  // namespace deferkv
