#pragma once
// Anonymous memory the kernel is asked to back with transparent huge pages (2 MiB on x86,
// madvise MADV_HUGEPAGE), for the weights decode streams through once per token: with
// 4 KiB pages a 1 GB model is a quarter of a million TLB entries per token, a page walk
// every 4 KiB of a read that is otherwise sequential, and F16 decode of a 500M model ran
// 10-14% faster on 2 MiB pages (bench/README.md, "Weights on huge pages").
#include <cstddef>
#include <cstdint>

namespace deferkv {

// Whether the kernel gives transparent huge pages to memory that asks for them:
// /sys/kernel/mm/transparent_hugepage/enabled is "[always]" or "[madvise]". False where
// the file is missing (not Linux, or a kernel without THP) or says "[never]".
bool transparent_huge_pages_enabled();

class HugePageBuffer {
 public:
  static constexpr size_t kHugePageBytes = size_t{2} << 20;

  HugePageBuffer() = default;
  // `bytes` of zeroed memory starting on a 2 MiB boundary; with advise_huge, the whole
  // 2 MiB pages in it are offered to the kernel as huge pages (which it may decline).
  // An Error naming the size when the address space cannot be had.
  HugePageBuffer(size_t bytes, bool advise_huge);
  ~HugePageBuffer();
  HugePageBuffer(HugePageBuffer&& other) noexcept;
  HugePageBuffer& operator=(HugePageBuffer&& other) noexcept;
  HugePageBuffer(const HugePageBuffer&) = delete;
  HugePageBuffer& operator=(const HugePageBuffer&) = delete;

  uint8_t* data() { return data_; }
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  // Bytes the kernel backs with huge pages now in the mappings that hold the buffer
  // (AnonHugePages in /proc/self/smaps; 0 where that cannot be read), for tests and reports.
  size_t huge_page_bytes() const;

 private:
  void unmap();

  uint8_t* mapping_ = nullptr;  // what mmap returned (up to one huge page before data_)
  size_t mapping_bytes_ = 0;
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace deferkv
