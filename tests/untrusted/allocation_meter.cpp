#include "untrusted/allocation_meter.h"

#include <malloc.h>

#include <atomic>
#include <cstdlib>
#include <new>

#include "deferkv/error.h"

namespace {

// Bytes the allocator handed out through operator new and not yet returned, counted by
// malloc_usable_size so that the free side needs no size (unsized delete).
std::atomic<int64_t> g_live{0};
std::atomic<int64_t> g_peak{0};

void* counted_alloc(std::size_t size) {
  void* p = std::malloc(size == 0 ? 1 : size);
  if (p == nullptr) throw std::bad_alloc();
  const int64_t live = g_live.fetch_add(static_cast<int64_t>(malloc_usable_size(p))) +
                       static_cast<int64_t>(malloc_usable_size(p));
  int64_t peak = g_peak.load(std::memory_order_relaxed);
  while (live > peak && !g_peak.compare_exchange_weak(peak, live, std::memory_order_relaxed)) {
  }
  return p;
}

void counted_free(void* p) noexcept {
  if (p == nullptr) return;
  g_live.fetch_sub(static_cast<int64_t>(malloc_usable_size(p)));
  std::free(p);
}

}  // namespace

// Every unaligned form, the nothrow ones included: AddressSanitizer supplies each form
// itself, so one left out would allocate through ASan and be freed here (an
// alloc-dealloc mismatch; std::stable_sort's buffer is a nothrow new). The over-aligned
// forms are all left to the runtime, which pairs them itself, uncounted.
void* operator new(std::size_t size) { return counted_alloc(size); }
void* operator new[](std::size_t size) { return counted_alloc(size); }
void* operator new(std::size_t size, const std::nothrow_t&) noexcept {
  try {
    return counted_alloc(size);
  } catch (const std::bad_alloc&) {
    return nullptr;
  }
}
void* operator new[](std::size_t size, const std::nothrow_t& tag) noexcept { return operator new(size, tag); }
void operator delete(void* p) noexcept { counted_free(p); }
void operator delete[](void* p) noexcept { counted_free(p); }
void operator delete(void* p, std::size_t) noexcept { counted_free(p); }
void operator delete[](void* p, std::size_t) noexcept { counted_free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { counted_free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { counted_free(p); }

namespace deferkv::testing {

Metered metered(const std::function<void()>& call) {
  const int64_t before = g_live.load();
  g_peak.store(before);
  Metered result;
  try {
    call();
  } catch (const Error& e) {
    result.error = e.what();
  }
  result.peak_bytes = g_peak.load() - before;
  return result;
}

}  // namespace deferkv::testing
