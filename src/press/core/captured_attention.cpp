#include "press/core/captured_attention.h"

#include <algorithm>

namespace deferkv {
namespace {

// values[i] for the entries at `positions` (ascending) from a capture of other entries
// (ascending): an entry the capture did not see scores 0.
std::vector<float> by_position(const std::vector<float>& values, const std::vector<int32_t>& captured,
                               const int32_t* positions, int64_t n) {
  std::vector<float> out(static_cast<size_t>(n), 0.0f);
  size_t i = 0;
  for (int64_t j = 0; j < n; ++j) {
    while (i < captured.size() && captured[i] < positions[j]) ++i;
    if (i < captured.size() && captured[i] == positions[j]) out[j] = values[i];
  }
  return out;
}

// Removes the elements at `indices` (strictly increasing, each < v.size()), in place.
template <typename T>
void erase_indices(std::vector<T>& v, const std::vector<int32_t>& indices) {
  if (indices.empty()) return;
  auto out = v.begin() + indices[0];
  for (size_t i = 0; i < indices.size(); ++i) {
    const auto next = i + 1 < indices.size() ? v.begin() + indices[i + 1] : v.end();
    out = std::move(v.begin() + indices[i] + 1, next, out);
  }
  v.erase(out, v.end());
}

}  // namespace

void CapturedAttention::fit(size_t g, const KvHeadView& head) {
  if (values.size() <= g) {
    values.resize(g + 1);
    positions.resize(g + 1);
  }
  versions.resize(values.size(), 0);
  std::vector<float>& v = values[g];
  std::vector<int32_t>& p = positions[g];
  const auto n = static_cast<size_t>(head.length);
  if (versions[g] == head.version && p.size() <= n) {
    p.insert(p.end(), head.positions + p.size(), head.positions + n);
  } else {
    // Entries a rollback has refilled since are other tokens than those captured.
    const auto refilled = std::lower_bound(p.begin(), p.end(), head.refilled_from(versions[g]));
    p.erase(refilled, p.end());
    v.resize(p.size(), 0.0f);  // forgotten values score 0
    v = by_position(v, p, head.positions, head.length);
    p.assign(head.positions, head.positions + n);
  }
  v.resize(n, 0.0f);
  versions[g] = head.version;
}

void CapturedAttention::follow_erase(size_t g, const std::vector<int32_t>& dropped, uint64_t version,
                                     bool keep_values) {
  erase_indices(positions[g], dropped);
  versions[g] = version;
  if (keep_values) {
    erase_indices(values[g], dropped);
  } else {
    values[g].clear();
  }
}

}  // namespace deferkv
