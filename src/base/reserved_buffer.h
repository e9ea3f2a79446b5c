#pragma once
// Anonymous memory reserved up front but committed by the OS only as pages are
// touched. release_from() hands the pages past a prefix back to the OS while keeping
// the reservation, so a buffer that shrinks frees real memory (resident bytes drop)
// and can grow again without moving its data.
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

  // Returns every whole page at or after byte `offset` to the OS (contents become zero).
  void release_from(size_t offset);
  // Bytes of the buffer the OS currently backs with memory (mincore).
  size_t resident_bytes() const;

 private:
  std::byte* data_ = nullptr;
  size_t capacity_ = 0;
};

}  // namespace deferkv
