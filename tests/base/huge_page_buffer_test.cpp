// HugePageBuffer: aligned, zeroed, writable to its last byte, moved without a copy; where
// the kernel gives transparent huge pages, memory that asks for them gets them.
#include "base/huge_page_buffer.h"

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <string>
#include <utility>

namespace deferkv {
namespace {

constexpr size_t kHuge = HugePageBuffer::kHugePageBytes;

TEST(HugePageBuffer, StartsOnAHugePageBoundaryZeroedAndWritableToTheEnd) {
  for (size_t bytes : {size_t{1}, size_t{4096}, kHuge - 1, kHuge, 3 * kHuge + 17}) {
    SCOPED_TRACE(bytes);
    HugePageBuffer buffer(bytes, true);
    ASSERT_NE(buffer.data(), nullptr);
    EXPECT_EQ(buffer.size(), bytes);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(buffer.data()) % kHuge, 0u);
    EXPECT_EQ(buffer.data()[0], 0);
    EXPECT_EQ(buffer.data()[bytes - 1], 0);
    std::memset(buffer.data(), 0xab, bytes);
    EXPECT_EQ(buffer.data()[bytes - 1], 0xab);
  }
  HugePageBuffer empty(0, true);
  EXPECT_EQ(empty.data(), nullptr);
  EXPECT_EQ(empty.huge_page_bytes(), 0u);
}

TEST(HugePageBuffer, MovesItsMemory) {
  HugePageBuffer a(kHuge, false);
  a.data()[5] = 42;
  uint8_t* at = a.data();
  HugePageBuffer b(std::move(a));
  EXPECT_EQ(a.data(), nullptr);
  EXPECT_EQ(a.size(), 0u);
  EXPECT_EQ(b.data(), at);
  EXPECT_EQ(b.data()[5], 42);
  HugePageBuffer c;
  c = std::move(b);
  EXPECT_EQ(c.data(), at);
  EXPECT_EQ(c.size(), kHuge);
}

// Where THP is on and the kernel compacts memory for regions that ask (defrag says
// "madvise" or "always"), touching an advised buffer faults it in 2 MiB at a time.
TEST(HugePageBuffer, GetsHugePagesWhereTheKernelGivesThem) {
  std::ifstream in("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string enabled;
  std::getline(in, enabled);
  EXPECT_EQ(transparent_huge_pages_enabled(),
            enabled.find("[always]") != std::string::npos || enabled.find("[madvise]") != std::string::npos)
      << enabled;
  std::ifstream defrag_in("/sys/kernel/mm/transparent_hugepage/defrag");
  std::string defrag;
  std::getline(defrag_in, defrag);
  const bool compacts = defrag.find("[always]") != std::string::npos ||
                        defrag.find("[madvise]") != std::string::npos ||
                        defrag.find("[defer+madvise]") != std::string::npos;
  HugePageBuffer buffer(8 * kHuge, true);
  std::memset(buffer.data(), 1, buffer.size());
  const size_t huge = buffer.huge_page_bytes();
  EXPECT_EQ(huge % kHuge, 0u);
  EXPECT_LE(huge, buffer.size());
  if (transparent_huge_pages_enabled() && compacts) EXPECT_GT(huge, 0u) << enabled << " / " << defrag;
}

}  // namespace
}  // namespace deferkv
