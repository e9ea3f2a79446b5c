#include "kv/kv_cache.h"

#include <algorithm>
#include <cstring>

#include "deferkv/error.h"

namespace deferkv {
namespace {

float* as_floats(ReservedBuffer& b) { return reinterpret_cast<float*>(b.data()); }
const float* as_floats(const ReservedBuffer& b) { return reinterpret_cast<const float*>(b.data()); }
int32_t* as_positions(ReservedBuffer& b) { return reinterpret_cast<int32_t*>(b.data()); }
const int32_t* as_positions(const ReservedBuffer& b) {
  return reinterpret_cast<const int32_t*>(b.data());
}

}  // namespace

KvCache::KvCache(int64_t n_layer, int64_t n_head_kv, int64_t head_dim, int64_t capacity)
    : n_layer_(n_layer), n_head_kv_(n_head_kv), head_dim_(head_dim), capacity_(capacity),
      layer_peak_bytes_(static_cast<size_t>(n_layer), 0) {
  heads_.resize(static_cast<size_t>(n_layer * n_head_kv));
  const auto rows = static_cast<size_t>(capacity * head_dim) * sizeof(float);
  for (auto& h : heads_) {
    h.keys = ReservedBuffer(rows);
    h.values = ReservedBuffer(rows);
    h.positions = ReservedBuffer(static_cast<size_t>(capacity) * sizeof(int32_t));
  }
}

const float* KvCache::keys(int64_t layer, int64_t kv_head) const {
  return as_floats(head(layer, kv_head).keys);
}
const float* KvCache::values(int64_t layer, int64_t kv_head) const {
  return as_floats(head(layer, kv_head).values);
}
const int32_t* KvCache::positions(int64_t layer, int64_t kv_head) const {
  return as_positions(head(layer, kv_head).positions);
}

int64_t KvCache::bytes_per_entry() const {
  return 2 * head_dim_ * static_cast<int64_t>(sizeof(float)) + static_cast<int64_t>(sizeof(int32_t));
}

int64_t KvCache::entries(int64_t layer) const {
  int64_t n = 0;
  for (int64_t g = 0; g < n_head_kv_; ++g) n += length(layer, g);
  return n;
}

int64_t KvCache::layer_bytes(int64_t layer) const { return entries(layer) * bytes_per_entry(); }

int64_t KvCache::resident_bytes() const {
  int64_t total = 0;
  for (const auto& h : heads_) {
    total += static_cast<int64_t>(h.keys.resident_bytes() + h.values.resident_bytes() +
                                  h.positions.resident_bytes());
  }
  return total;
}

void KvCache::append(int64_t layer, const float* k, const float* v, const int32_t* positions,
                     int64_t n) {
  const int64_t row = n_head_kv_ * head_dim_;
  // Check every head before touching any, so a failed append changes nothing.
  for (int64_t g = 0; g < n_head_kv_; ++g) {
    const HeadStore& h = head(layer, g);
    if (h.length + n > capacity_) {
      fail("KV cache is full: layer {} head {} holds {} entries, {} more do not fit in the "
           "context of {}", layer, g, h.length, n, capacity_);
    }
  }
  for (int64_t g = 0; g < n_head_kv_; ++g) {
    HeadStore& h = head(layer, g);
    float* keys = as_floats(h.keys) + h.length * head_dim_;
    float* values = as_floats(h.values) + h.length * head_dim_;
    for (int64_t i = 0; i < n; ++i) {
      std::memcpy(keys + i * head_dim_, k + i * row + g * head_dim_, head_dim_ * sizeof(float));
      std::memcpy(values + i * head_dim_, v + i * row + g * head_dim_, head_dim_ * sizeof(float));
    }
    std::memcpy(as_positions(h.positions) + h.length, positions, n * sizeof(int32_t));
    h.length += n;
  }
  bytes_held_ += n * n_head_kv_ * bytes_per_entry();
  peak_bytes_ = std::max(peak_bytes_, bytes_held_);
  auto& layer_peak = layer_peak_bytes_[static_cast<size_t>(layer)];
  layer_peak = std::max(layer_peak, layer_bytes(layer));
}

void KvCache::shrink(HeadStore& h, int64_t length) {
  const auto row_bytes = static_cast<size_t>(head_dim_) * sizeof(float);
  const auto before = static_cast<size_t>(h.length), after = static_cast<size_t>(length);
  h.keys.release(after * row_bytes, before * row_bytes);
  h.values.release(after * row_bytes, before * row_bytes);
  h.positions.release(after * sizeof(int32_t), before * sizeof(int32_t));
  h.length = length;
}

void KvCache::recount() {
  bytes_held_ = 0;
  for (const auto& h : heads_) bytes_held_ += h.length * bytes_per_entry();
}

void KvCache::retain(int64_t layer, int64_t kv_head, const std::vector<int32_t>& indices) {
  HeadStore& h = head(layer, kv_head);
  for (size_t i = 0; i < indices.size(); ++i) {
    if (indices[i] < 0 || indices[i] >= h.length || (i > 0 && indices[i] <= indices[i - 1])) {
      fail("internal: retain on layer {} head {} needs increasing indices below {}, got {} at {}",
           layer, kv_head, h.length, indices[i], i);
    }
  }
  float* keys = as_floats(h.keys);
  float* values = as_floats(h.values);
  int32_t* positions = as_positions(h.positions);
  const auto row_bytes = static_cast<size_t>(head_dim_) * sizeof(float);
  // Indices increase, so each kept entry moves towards the front (or stays): copying
  // in order never overwrites an entry still to be read.
  for (size_t i = 0; i < indices.size(); ++i) {
    const auto from = static_cast<int64_t>(indices[i]);
    const auto to = static_cast<int64_t>(i);
    if (from == to) continue;
    std::memcpy(keys + to * head_dim_, keys + from * head_dim_, row_bytes);
    std::memcpy(values + to * head_dim_, values + from * head_dim_, row_bytes);
    positions[to] = positions[from];
  }
  const int64_t dropped = h.length - static_cast<int64_t>(indices.size());
  shrink(h, static_cast<int64_t>(indices.size()));
  bytes_held_ -= dropped * bytes_per_entry();
}

void KvCache::truncate(int32_t position) {
  for (auto& h : heads_) {
    const int32_t* positions = as_positions(h.positions);
    shrink(h, std::lower_bound(positions, positions + h.length, position) - positions);
  }
  recount();
}

KvCache::Snapshot KvCache::snapshot() const {
  Snapshot s;
  for (const auto& h : heads_) {
    const auto n = static_cast<size_t>(h.length * head_dim_);
    s.lengths.push_back(h.length);
    s.keys.emplace_back(as_floats(h.keys), as_floats(h.keys) + n);
    s.values.emplace_back(as_floats(h.values), as_floats(h.values) + n);
    s.positions.emplace_back(as_positions(h.positions), as_positions(h.positions) + h.length);
  }
  return s;
}

void KvCache::restore(const Snapshot& s) {
  if (s.lengths.size() != heads_.size()) {
    fail("cannot restore a KV snapshot of {} heads into a cache of {}", s.lengths.size(), heads_.size());
  }
  for (size_t i = 0; i < heads_.size(); ++i) {
    HeadStore& h = heads_[i];
    std::memcpy(h.keys.data(), s.keys[i].data(), s.keys[i].size() * sizeof(float));
    std::memcpy(h.values.data(), s.values[i].data(), s.values[i].size() * sizeof(float));
    std::memcpy(h.positions.data(), s.positions[i].data(), s.positions[i].size() * sizeof(int32_t));
    shrink(h, s.lengths[i]);
  }
  recount();
  peak_bytes_ = std::max(peak_bytes_, bytes_held_);
  for (int64_t l = 0; l < n_layer_; ++l) {
    auto& layer_peak = layer_peak_bytes_[static_cast<size_t>(l)];
    layer_peak = std::max(layer_peak, layer_bytes(l));
  }
}

}  // namespace deferkv
