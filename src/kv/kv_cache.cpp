#include "kv/kv_cache.h"

#include <algorithm>
#include <cstring>

#include "deferkv/error.h"
#include "kernels/quant.h"

namespace deferkv {
namespace {

uint8_t* as_bytes(ReservedBuffer& b) { return reinterpret_cast<uint8_t*>(b.data()); }
const uint8_t* as_bytes(const ReservedBuffer& b) { return reinterpret_cast<const uint8_t*>(b.data()); }
int32_t* as_positions(ReservedBuffer& b) { return reinterpret_cast<int32_t*>(b.data()); }
const int32_t* as_positions(const ReservedBuffer& b) {
  return reinterpret_cast<const int32_t*>(b.data());
}

}  // namespace

KvCache::KvCache(int64_t n_layer, int64_t n_head_kv, int64_t head_dim, int64_t capacity, KvCacheTypes types)
    : n_layer_(n_layer), n_head_kv_(n_head_kv), head_dim_(head_dim), capacity_(capacity), types_(types),
      layer_peak_bytes_(static_cast<size_t>(n_layer), 0) {
  check_kv_cache_type(types.keys, head_dim, "key");
  check_kv_cache_type(types.values, head_dim, "value");
  key_row_bytes_ = dtype_row_bytes(types.keys, head_dim);
  value_row_bytes_ = dtype_row_bytes(types.values, head_dim);
  heads_.resize(static_cast<size_t>(n_layer * n_head_kv));
  for (auto& h : heads_) {
    h.keys = ReservedBuffer(static_cast<size_t>(capacity * key_row_bytes_));
    h.values = ReservedBuffer(static_cast<size_t>(capacity * value_row_bytes_));
    h.positions = ReservedBuffer(static_cast<size_t>(capacity) * sizeof(int32_t));
  }
}

KvRows KvCache::keys(int64_t layer, int64_t kv_head) const {
  return {as_bytes(head(layer, kv_head).keys), types_.keys, head_dim_};
}
KvRows KvCache::values(int64_t layer, int64_t kv_head) const {
  return {as_bytes(head(layer, kv_head).values), types_.values, head_dim_};
}
const int32_t* KvCache::positions(int64_t layer, int64_t kv_head) const {
  return as_positions(head(layer, kv_head).positions);
}
KvHeadView KvCache::view(int64_t layer, int64_t kv_head) const {
  return {keys(layer, kv_head), values(layer, kv_head), positions(layer, kv_head), length(layer, kv_head)};
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
    uint8_t* keys = as_bytes(h.keys) + h.length * key_row_bytes_;
    uint8_t* values = as_bytes(h.values) + h.length * value_row_bytes_;
    for (int64_t i = 0; i < n; ++i) {
      quantize_row(types_.keys, k + i * row + g * head_dim_, keys + i * key_row_bytes_, head_dim_);
      quantize_row(types_.values, v + i * row + g * head_dim_, values + i * value_row_bytes_, head_dim_);
    }
    std::memcpy(as_positions(h.positions) + h.length, positions, n * sizeof(int32_t));
    h.length += n;
    h.touched = std::max(h.touched, h.length);
  }
  bytes_held_ += n * n_head_kv_ * bytes_per_entry();
  peak_bytes_ = std::max(peak_bytes_, bytes_held_);
  auto& layer_peak = layer_peak_bytes_[static_cast<size_t>(layer)];
  layer_peak = std::max(layer_peak, layer_bytes(layer));
}

void KvCache::shrink(HeadStore& h, int64_t length) {
  h.length = length;
  if ((h.touched - length) * (key_row_bytes_ + value_row_bytes_) < kReleaseBatchBytes) return;
  const auto before = static_cast<size_t>(h.touched), after = static_cast<size_t>(length);
  const auto key_bytes = static_cast<size_t>(key_row_bytes_), value_bytes = static_cast<size_t>(value_row_bytes_);
  h.keys.release(after * key_bytes, before * key_bytes);
  h.values.release(after * value_bytes, before * value_bytes);
  h.positions.release(after * sizeof(int32_t), before * sizeof(int32_t));
  h.touched = length;
}

void KvCache::recount() {
  bytes_held_ = 0;
  for (const auto& h : heads_) bytes_held_ += h.length * bytes_per_entry();
}

void KvCache::check_indices(const HeadStore& h, int64_t layer, int64_t kv_head, const std::vector<int32_t>& indices,
                            const char* what) const {
  for (size_t i = 0; i < indices.size(); ++i) {
    if (indices[i] < 0 || indices[i] >= h.length || (i > 0 && indices[i] <= indices[i - 1])) {
      fail("internal: {} on layer {} head {} needs increasing indices below {}, got {} at {}", what, layer, kv_head,
           h.length, indices[i], i);
    }
  }
}

void KvCache::move_entries(HeadStore& h, int64_t from, int64_t to, int64_t count) {
  if (from == to || count == 0) return;
  uint8_t* keys = as_bytes(h.keys);
  uint8_t* values = as_bytes(h.values);
  int32_t* positions = as_positions(h.positions);
  std::memmove(keys + to * key_row_bytes_, keys + from * key_row_bytes_, static_cast<size_t>(count * key_row_bytes_));
  std::memmove(values + to * value_row_bytes_, values + from * value_row_bytes_,
               static_cast<size_t>(count * value_row_bytes_));
  std::memmove(positions + to, positions + from, static_cast<size_t>(count) * sizeof(int32_t));
}

void KvCache::retain(int64_t layer, int64_t kv_head, const std::vector<int32_t>& indices) {
  HeadStore& h = head(layer, kv_head);
  check_indices(h, layer, kv_head, indices, "retain");
  // Indices increase, so each kept entry moves towards the front (or stays): moving runs
  // of consecutive kept entries in order never overwrites an entry still to be read.
  const auto n = static_cast<int64_t>(indices.size());
  for (int64_t to = 0; to < n;) {
    const int64_t from = indices[static_cast<size_t>(to)];
    int64_t run = 1;
    while (to + run < n && indices[static_cast<size_t>(to + run)] == from + run) ++run;
    move_entries(h, from, to, run);
    to += run;
  }
  const int64_t dropped = h.length - n;
  shrink(h, n);
  bytes_held_ -= dropped * bytes_per_entry();
}

void KvCache::erase(int64_t layer, int64_t kv_head, const std::vector<int32_t>& dropped) {
  HeadStore& h = head(layer, kv_head);
  check_indices(h, layer, kv_head, dropped, "erase");
  // The entries between dropped k and dropped k + 1 move forward by k + 1.
  const auto n = static_cast<int64_t>(dropped.size());
  for (int64_t k = 0; k < n; ++k) {
    const int64_t from = dropped[static_cast<size_t>(k)] + 1;
    const int64_t end = k + 1 < n ? dropped[static_cast<size_t>(k + 1)] : h.length;
    move_entries(h, from, from - (k + 1), end - from);
  }
  shrink(h, h.length - n);
  bytes_held_ -= n * bytes_per_entry();
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
  s.types = types_;
  s.head_dim = head_dim_;
  for (const auto& h : heads_) {
    s.lengths.push_back(h.length);
    s.keys.emplace_back(as_bytes(h.keys), as_bytes(h.keys) + h.length * key_row_bytes_);
    s.values.emplace_back(as_bytes(h.values), as_bytes(h.values) + h.length * value_row_bytes_);
    s.positions.emplace_back(as_positions(h.positions), as_positions(h.positions) + h.length);
  }
  return s;
}

void KvCache::restore(const Snapshot& s) {
  if (s.lengths.size() != heads_.size()) {
    fail("cannot restore a KV snapshot of {} heads into a cache of {}", s.lengths.size(), heads_.size());
  }
  if (s.types.keys != types_.keys || s.types.values != types_.values) {
    fail("cannot restore a KV snapshot stored as {}/{} (keys/values) into a cache of {}/{}",
         kv_cache_type_name(s.types.keys), kv_cache_type_name(s.types.values), kv_cache_type_name(types_.keys),
         kv_cache_type_name(types_.values));
  }
  if (s.head_dim != head_dim_) fail("cannot restore a KV snapshot of head_dim {} into a cache of {}", s.head_dim, head_dim_);
  for (int64_t length : s.lengths) {
    if (length > capacity_) {
      fail("cannot restore a KV snapshot holding {} entries in a head into a cache of {}", length, capacity_);
    }
  }
  for (size_t i = 0; i < heads_.size(); ++i) {
    HeadStore& h = heads_[i];
    std::memcpy(h.keys.data(), s.keys[i].data(), s.keys[i].size());
    std::memcpy(h.values.data(), s.values[i].data(), s.values[i].size());
    std::memcpy(h.positions.data(), s.positions[i].data(), s.positions[i].size() * sizeof(int32_t));
    h.touched = std::max(h.touched, s.lengths[i]);
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
