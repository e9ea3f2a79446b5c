#include "kv/kv_cache.h"

#include <algorithm>

#include "deferkv/error.h"

namespace deferkv {

KvCache::KvCache(int64_t n_layer, int64_t n_head_kv, int64_t head_dim, int64_t capacity)
    : n_layer_(n_layer), n_head_kv_(n_head_kv), head_dim_(head_dim), capacity_(capacity) {
  heads_.resize(static_cast<size_t>(n_layer * n_head_kv));
  for (auto& h : heads_) {
    h.keys.reserve(static_cast<size_t>(capacity * head_dim));
    h.values.reserve(static_cast<size_t>(capacity * head_dim));
    h.positions.reserve(static_cast<size_t>(capacity));
  }
}

int64_t KvCache::bytes_per_entry() const {
  return 2 * head_dim_ * static_cast<int64_t>(sizeof(float)) + static_cast<int64_t>(sizeof(int32_t));
}

void KvCache::append(int64_t layer, const float* k, const float* v, const int32_t* positions,
                     int64_t n) {
  const int64_t row = n_head_kv_ * head_dim_;
  // Check every head before touching any, so a failed append changes nothing.
  for (int64_t g = 0; g < n_head_kv_; ++g) {
    const HeadStore& h = head(layer, g);
    if (static_cast<int64_t>(h.positions.size()) + n > capacity_) {
      fail("KV cache is full: layer {} head {} holds {} entries, {} more do not fit in the "
           "context of {}", layer, g, h.positions.size(), n, capacity_);
    }
  }
  for (int64_t g = 0; g < n_head_kv_; ++g) {
    HeadStore& h = head(layer, g);
    for (int64_t i = 0; i < n; ++i) {
      const float* kr = k + i * row + g * head_dim_;
      const float* vr = v + i * row + g * head_dim_;
      h.keys.insert(h.keys.end(), kr, kr + head_dim_);
      h.values.insert(h.values.end(), vr, vr + head_dim_);
    }
    h.positions.insert(h.positions.end(), positions, positions + n);
  }
  bytes_held_ += n * n_head_kv_ * bytes_per_entry();
  peak_bytes_ = std::max(peak_bytes_, bytes_held_);
}

void KvCache::truncate(int32_t position) {
  bytes_held_ = 0;
  for (auto& h : heads_) {
    // Entries are stored in position order, so the ones to drop are a suffix.
    size_t keep = h.positions.size();
    while (keep > 0 && h.positions[keep - 1] >= position) --keep;
    h.positions.resize(keep);
    h.keys.resize(keep * static_cast<size_t>(head_dim_));
    h.values.resize(keep * static_cast<size_t>(head_dim_));
    bytes_held_ += static_cast<int64_t>(keep) * bytes_per_entry();
  }
}

}  // namespace deferkv
