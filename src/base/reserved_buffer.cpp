#include "base/reserved_buffer.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "deferkv/error.h"

namespace deferkv {
namespace {

size_t page_size() {
  static const size_t size = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return size;
}

size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }
size_t round_down(size_t n, size_t to) { return n / to * to; }

}  // namespace

ReservedBuffer::ReservedBuffer(size_t capacity_bytes) : capacity_(capacity_bytes) {
  if (capacity_ == 0) return;
  // MAP_NORESERVE: reserving a long context must not count against overcommit limits
  // for pages that are never touched.
  void* p = mmap(nullptr, round_up(capacity_, page_size()), PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) {
    fail("cannot reserve {} bytes of address space: {}", capacity_, std::strerror(errno));
  }
  data_ = static_cast<std::byte*>(p);
}

ReservedBuffer::~ReservedBuffer() {
  if (data_ != nullptr) munmap(data_, round_up(capacity_, page_size()));
}

ReservedBuffer::ReservedBuffer(ReservedBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), capacity_(std::exchange(other.capacity_, 0)) {}

ReservedBuffer& ReservedBuffer::operator=(ReservedBuffer&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) munmap(data_, round_up(capacity_, page_size()));
    data_ = std::exchange(other.data_, nullptr);
    capacity_ = std::exchange(other.capacity_, 0);
  }
  return *this;
}

void ReservedBuffer::release_after(size_t used, size_t was_used) {
  const size_t first = round_up(used, page_size());
  const size_t end = std::min(round_up(was_used, page_size()), round_up(capacity_, page_size()));
  if (data_ == nullptr || first >= end) return;
  madvise(data_ + first, end - first, MADV_DONTNEED);
}

void ReservedBuffer::release_before(size_t unused_from, size_t used_from) {
  const size_t first = round_down(unused_from, page_size());
  const size_t end = round_down(std::min(used_from, capacity_), page_size());
  if (data_ == nullptr || first >= end) return;
  madvise(data_ + first, end - first, MADV_DONTNEED);
}

size_t ReservedBuffer::resident_bytes() const {
  if (data_ == nullptr) return 0;
  const size_t pages = round_up(capacity_, page_size()) / page_size();
  std::vector<unsigned char> resident(pages);
  if (mincore(data_, pages * page_size(), resident.data()) != 0) return 0;
  size_t count = 0;
  for (unsigned char r : resident) count += r & 1;
  return count * page_size();
}

}  // namespace deferkv
