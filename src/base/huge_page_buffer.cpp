#include "base/huge_page_buffer.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <utility>

#include "deferkv/error.h"

namespace deferkv {

bool transparent_huge_pages_enabled() {
  std::ifstream in("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string line;
  if (!std::getline(in, line)) return false;
  return line.find("[always]") != std::string::npos || line.find("[madvise]") != std::string::npos;
}

HugePageBuffer::HugePageBuffer(size_t bytes, bool advise_huge) : size_(bytes) {
  if (bytes == 0) return;
  // One huge page more than asked for, so that a 2 MiB boundary lies inside the first one:
  // mmap aligns to 4 KiB only, and a huge page must start on a 2 MiB boundary.
  const size_t rounded = (bytes + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
  mapping_bytes_ = rounded + kHugePageBytes;
  void* p = mmap(nullptr, mapping_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                 -1, 0);
  if (p == MAP_FAILED) {
    mapping_bytes_ = 0;
    fail("cannot allocate {} bytes for the model's weights: {}", bytes, std::strerror(errno));
  }
  mapping_ = static_cast<uint8_t*>(p);
  const auto address = reinterpret_cast<uintptr_t>(mapping_);
  data_ = mapping_ + ((kHugePageBytes - address % kHugePageBytes) % kHugePageBytes);
  // A failed madvise (a kernel without THP) leaves ordinary pages, which work the same.
  if (advise_huge) madvise(data_, rounded, MADV_HUGEPAGE);
}

HugePageBuffer::~HugePageBuffer() { unmap(); }

void HugePageBuffer::unmap() {
  if (mapping_ != nullptr) munmap(mapping_, mapping_bytes_);
  mapping_ = data_ = nullptr;
  mapping_bytes_ = size_ = 0;
}

HugePageBuffer::HugePageBuffer(HugePageBuffer&& other) noexcept
    : mapping_(std::exchange(other.mapping_, nullptr)),
      mapping_bytes_(std::exchange(other.mapping_bytes_, 0)),
      data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)) {}

HugePageBuffer& HugePageBuffer::operator=(HugePageBuffer&& other) noexcept {
  if (this != &other) {
    unmap();
    mapping_ = std::exchange(other.mapping_, nullptr);
    mapping_bytes_ = std::exchange(other.mapping_bytes_, 0);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

size_t HugePageBuffer::huge_page_bytes() const {
  if (mapping_ == nullptr) return 0;
  // smaps lists each mapping as "start-end perms ..." followed by its fields. madvise splits
  // ours where the advice starts, and the kernel may merge a piece with a neighbour, so
  // the count is over every mapping that overlaps the buffer.
  std::ifstream in("/proc/self/smaps");
  std::string line;
  bool ours = false;
  size_t total = 0;
  const auto start = reinterpret_cast<uintptr_t>(mapping_);
  const auto end = start + mapping_bytes_;
  while (std::getline(in, line)) {
    uintptr_t lo = 0, hi = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx ", &lo, &hi) == 2) {  // a mapping's first line
      ours = lo < end && start < hi;
      continue;
    }
    size_t kib = 0;
    if (ours && std::sscanf(line.c_str(), "AnonHugePages: %zu kB", &kib) == 1) total += kib * 1024;
  }
  return total;
}

}  // namespace deferkv
