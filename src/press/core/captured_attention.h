#pragma once
// The attention a scored press captured for one layer: a value per entry of each KV head,
// with the entries' positions, kept matched to the heads as the cache changes (entries
// appended, entries dropped by this press or by another one in a composition).
#include <cstdint>
#include <vector>

#include "kernels/attention.h"

namespace deferkv {

struct CapturedAttention {
  std::vector<std::vector<float>> values;       // [g][entry]
  std::vector<std::vector<int32_t>> positions;  // [g][entry]
  std::vector<uint64_t> versions;               // [g]: the head's version (KvHeadView) when fitted

  // Fits head g to the head's entries, in place: one value per entry, in the head's order
  // (a new entry scores 0, and so does one a rollback has put at a position captured
  // before; after another press's eviction the values follow their entries by position).
  // Under the version it was last fitted to the head has only appended, so only the new
  // entries' positions are copied.
  void fit(size_t g, const KvHeadView& head);
  // Head g, fitted to a head that has since dropped the entries at `dropped` (strictly
  // increasing) and so reached `version`: drops the same entries' positions and values
  // (their values zeroed instead with keep_values false), staying fitted.
  void follow_erase(size_t g, const std::vector<int32_t>& dropped, uint64_t version, bool keep_values);
  // Zeroes every head's values but keeps their memory and the entries' positions, for a
  // per-step press whose next step captures as many entries again (freeing and growing
  // ~2 x 16 KB per head and layer every step at 4K entries made the allocator hand pages
  // back and fault them in).
  void forget() {
    for (auto& v : values) v.clear();
  }
};

}  // namespace deferkv
