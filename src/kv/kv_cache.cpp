#include "kv/kv_cache.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <limits>

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

void KvCache::renew_version(HeadStore& h) {
  static std::atomic<uint64_t> next{1};  // shared by every cache, so versions never repeat
  h.version = next.fetch_add(1, std::memory_order_relaxed);
}

void KvCache::roll_back(HeadStore& h, int32_t position) {
  renew_version(h);
  while (!h.rollbacks.empty() && h.rollbacks.back().position >= position) h.rollbacks.pop_back();
  h.rollbacks.push_back({h.version, position});
}

KvCache::KvCache(int64_t n_layer, int64_t n_head_kv, int64_t head_dim, int64_t capacity, KvCacheTypes types)
    : n_layer_(n_layer), n_head_kv_(n_head_kv), head_dim_(head_dim), capacity_(capacity), types_(types),
      layer_peak_bytes_(static_cast<size_t>(n_layer), 0) {
  check_kv_cache_type(types.keys, head_dim, "key");
  check_kv_cache_type(types.values, head_dim, "value");
  key_row_bytes_ = dtype_row_bytes(types.keys, head_dim);
  value_row_bytes_ = dtype_row_bytes(types.values, head_dim);
  heads_.resize(static_cast<size_t>(n_layer * n_head_kv));
  const auto slots = static_cast<size_t>(2 * capacity);
  for (auto& h : heads_) {
    h.keys = ReservedBuffer(slots * static_cast<size_t>(key_row_bytes_));
    h.values = ReservedBuffer(slots * static_cast<size_t>(value_row_bytes_));
    h.positions = ReservedBuffer(slots * sizeof(int32_t));
    renew_version(h);
  }
}

KvRows KvCache::keys(int64_t layer, int64_t kv_head) const {
  const HeadStore& h = head(layer, kv_head);
  return {as_bytes(h.keys) + h.start * key_row_bytes_, types_.keys, head_dim_};
}
KvRows KvCache::values(int64_t layer, int64_t kv_head) const {
  const HeadStore& h = head(layer, kv_head);
  return {as_bytes(h.values) + h.start * value_row_bytes_, types_.values, head_dim_};
}
const int32_t* KvCache::positions(int64_t layer, int64_t kv_head) const {
  const HeadStore& h = head(layer, kv_head);
  return as_positions(h.positions) + h.start;
}
KvHeadView KvCache::view(int64_t layer, int64_t kv_head) const {
  const HeadStore& h = head(layer, kv_head);
  return {keys(layer, kv_head), values(layer, kv_head), positions(layer, kv_head), h.length, h.version, h.rollbacks};
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
    if (h.start + h.length + n > 2 * capacity_) move_to_front(h);
    const int64_t end = h.start + h.length;
    uint8_t* keys = as_bytes(h.keys) + end * key_row_bytes_;
    uint8_t* values = as_bytes(h.values) + end * value_row_bytes_;
    for (int64_t i = 0; i < n; ++i) {
      quantize_row(types_.keys, k + i * row + g * head_dim_, keys + i * key_row_bytes_, head_dim_);
      quantize_row(types_.values, v + i * row + g * head_dim_, values + i * value_row_bytes_, head_dim_);
    }
    std::memcpy(as_positions(h.positions) + end, positions, n * sizeof(int32_t));
    h.length += n;
    h.touched = std::max(h.touched, end + n);
  }
  bytes_held_ += n * n_head_kv_ * bytes_per_entry();
  peak_bytes_ = std::max(peak_bytes_, bytes_held_);
  auto& layer_peak = layer_peak_bytes_[static_cast<size_t>(layer)];
  layer_peak = std::max(layer_peak, layer_bytes(layer));
}

void KvCache::shrink(HeadStore& h, int64_t length) {
  h.length = length;
  const int64_t end = h.start + length;
  if ((h.touched - end) * (key_row_bytes_ + value_row_bytes_) < kReleaseBatchBytes) return;
  const auto before = static_cast<size_t>(h.touched), after = static_cast<size_t>(end);
  const auto key_bytes = static_cast<size_t>(key_row_bytes_), value_bytes = static_cast<size_t>(value_row_bytes_);
  h.keys.release_after(after * key_bytes, before * key_bytes);
  h.values.release_after(after * value_bytes, before * value_bytes);
  h.positions.release_after(after * sizeof(int32_t), before * sizeof(int32_t));
  h.touched = end;
}

void KvCache::release_before_window(HeadStore& h) {
  if ((h.start - h.unused_from) * (key_row_bytes_ + value_row_bytes_) < kReleaseBatchBytes) return;
  const auto from = static_cast<size_t>(h.unused_from), to = static_cast<size_t>(h.start);
  const auto key_bytes = static_cast<size_t>(key_row_bytes_), value_bytes = static_cast<size_t>(value_row_bytes_);
  h.keys.release_before(from * key_bytes, to * key_bytes);
  h.values.release_before(from * value_bytes, to * value_bytes);
  h.positions.release_before(from * sizeof(int32_t), to * sizeof(int32_t));
  h.unused_from = h.start;
}

void KvCache::move_to_front(HeadStore& h) {
  move_entries(h, 0, -h.start, h.length);
  h.start = 0;
  h.unused_from = 0;
  shrink(h, h.length);  // the slots the window left behind
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
  uint8_t* keys = as_bytes(h.keys) + h.start * key_row_bytes_;
  uint8_t* values = as_bytes(h.values) + h.start * value_row_bytes_;
  int32_t* positions = as_positions(h.positions) + h.start;
  std::memmove(keys + to * key_row_bytes_, keys + from * key_row_bytes_, static_cast<size_t>(count * key_row_bytes_));
  std::memmove(values + to * value_row_bytes_, values + from * value_row_bytes_,
               static_cast<size_t>(count * value_row_bytes_));
  std::memmove(positions + to, positions + from, static_cast<size_t>(count) * sizeof(int32_t));
}

void KvCache::retain(int64_t layer, int64_t kv_head, const std::vector<int32_t>& indices) {
  HeadStore& h = head(layer, kv_head);
  // The indices between the kept ones, checking the kept ones on the way.
  std::vector<int32_t> dropped;
  int32_t next = 0;  // the first index not yet kept or dropped
  for (int32_t kept : indices) {
    if (kept < next || kept >= h.length) check_indices(h, layer, kv_head, indices, "retain");  // fails
    for (; next < kept; ++next) dropped.push_back(next);
    next = kept + 1;
  }
  for (; next < h.length; ++next) dropped.push_back(next);
  drop_entries(h, dropped);
}

void KvCache::erase(int64_t layer, int64_t kv_head, const std::vector<int32_t>& dropped) {
  HeadStore& h = head(layer, kv_head);
  check_indices(h, layer, kv_head, dropped, "erase");
  drop_entries(h, dropped);
}

void KvCache::drop_entries(HeadStore& h, const std::vector<int32_t>& dropped) {
  const auto n = static_cast<int64_t>(dropped.size());
  if (n == 0) return;
  renew_version(h);
  const auto at = [&](int64_t k) { return static_cast<int64_t>(dropped[static_cast<size_t>(k)]); };
  const int64_t after_first = h.length - at(0) - n;  // kept entries after the first dropped
  const int64_t before_last = at(n - 1) - (n - 1);   // kept entries before the last dropped
  if (after_first <= before_last) {
    // The entries between dropped k and dropped k + 1 move forward by k + 1, in order, so
    // none overwrites an entry still to be moved.
    for (int64_t k = 0; k < n; ++k) {
      const int64_t from = at(k) + 1;
      const int64_t end = k + 1 < n ? at(k + 1) : h.length;
      move_entries(h, from, from - (k + 1), end - from);
    }
    shrink(h, h.length - n);
  } else {
    // The entries between dropped k - 1 and dropped k move back by n - k, the last run
    // first; then the window starts n slots later.
    for (int64_t k = n - 1; k >= 0; --k) {
      const int64_t from = k > 0 ? at(k - 1) + 1 : 0;
      move_entries(h, from, from + (n - k), at(k) - from);
    }
    h.start += n;
    h.length -= n;
    release_before_window(h);
  }
  bytes_held_ -= n * bytes_per_entry();
}

void KvCache::truncate(int32_t position) {
  for (auto& h : heads_) {
    const int32_t* positions = as_positions(h.positions) + h.start;
    // Even with nothing dropped: entries another eviction removed at these positions may
    // come back as other tokens.
    roll_back(h, position);
    shrink(h, std::lower_bound(positions, positions + h.length, position) - positions);
  }
  recount();
}

KvCache::Snapshot KvCache::snapshot() const {
  Snapshot s;
  s.types = types_;
  s.head_dim = head_dim_;
  for (int64_t l = 0; l < n_layer_; ++l) {  // in heads_'s order
    for (int64_t g = 0; g < n_head_kv_; ++g) {
      const KvHeadView v = view(l, g);
      s.lengths.push_back(v.length);
      s.keys.emplace_back(v.keys.data, v.keys.row(v.length));
      s.values.emplace_back(v.values.data, v.values.row(v.length));
      s.positions.emplace_back(v.positions, v.positions + v.length);
    }
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
    h.start = 0;  // the slots before the old window become the tail, released below
    h.unused_from = 0;
    roll_back(h, std::numeric_limits<int32_t>::min());  // every entry may be another token
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
