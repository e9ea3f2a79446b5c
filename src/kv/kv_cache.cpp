#include "kv/kv_cache.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <limits>

#include "base/thread_pool.h"
#include "deferkv/error.h"

namespace deferkv {

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
  for (auto& h : heads_) {
    h.rows = SlotWindow({key_row_bytes_, value_row_bytes_}, 2 * capacity);
    h.positions = SlotWindow({int64_t{sizeof(int32_t)}}, 2 * capacity);
    renew_version(h);
  }
}

KvRowCoding KvCache::key_coding(const HeadStore& h) const {
  return {kv_cache_type_is_quantised(types_.keys), h.key_shift.empty() ? nullptr : h.key_shift.data()};
}
KvRowCoding KvCache::value_coding() const { return {kv_cache_type_is_quantised(types_.values)}; }

KvRows KvCache::keys(int64_t layer, int64_t kv_head) const {
  const HeadStore& h = head(layer, kv_head);
  return {h.rows.at(0, 0), types_.keys, head_dim_, h.holes, key_coding(h)};
}
KvRows KvCache::values(int64_t layer, int64_t kv_head) const {
  const HeadStore& h = head(layer, kv_head);
  return {h.rows.at(1, 0), types_.values, head_dim_, h.holes, value_coding()};
}
const int32_t* KvCache::positions(int64_t layer, int64_t kv_head) const {
  return reinterpret_cast<const int32_t*>(head(layer, kv_head).positions.at(0, 0));
}
KvHeadView KvCache::view(int64_t layer, int64_t kv_head) const {
  const HeadStore& h = head(layer, kv_head);
  return {keys(layer, kv_head), values(layer, kv_head), positions(layer, kv_head), h.length(), h.version, h.rollbacks};
}

int64_t KvCache::entries(int64_t layer) const {
  int64_t n = 0;
  for (int64_t g = 0; g < n_head_kv_; ++g) n += length(layer, g);
  return n;
}

int64_t KvCache::layer_bytes(int64_t layer) const { return entries(layer) * bytes_per_entry(); }

int64_t KvCache::resident_bytes() const {
  int64_t total = 0;
  for (const auto& h : heads_) total += h.rows.resident_bytes() + h.positions.resident_bytes();
  return total;
}

void KvCache::append(int64_t layer, const float* k, const float* v, const int32_t* positions, int64_t n,
                     ThreadPool* pool) {
  const int64_t row = n_head_kv_ * head_dim_;
  // Check every head before touching any, so a failed append changes nothing.
  for (int64_t g = 0; g < n_head_kv_; ++g) {
    const HeadStore& h = head(layer, g);
    if (h.length() + n > capacity_) {
      fail("KV cache is full: layer {} head {} holds {} entries, {} more do not fit in the "
           "context of {}", layer, g, h.length(), n, capacity_);
    }
  }
  // Coded rows are encoded through scratch; the others (f16 by default) need none.
  const bool coded = kv_cache_type_is_quantised(types_.keys) || kv_cache_type_is_quantised(types_.values);
  const auto append_heads = [&](int64_t first_head, int64_t end_head, int) {
    std::vector<float> scratch(coded ? static_cast<size_t>(head_dim_) : 0);
    for (int64_t g = first_head; g < end_head; ++g) {
      HeadStore& h = head(layer, g);
      // An empty head holds no row that its shift encodes, so it may take a new one.
      if (h.length() == 0) choose_key_shift(h, k + g * head_dim_, row, n);
      // Rows stay within the context too, so the window always finds room in its 2 x capacity slots.
      if (h.rows.count() + n > capacity_) close_holes(h);
      h.rows.make_room(n);
      h.positions.make_room(n);
      const int64_t end = h.rows.count();
      const KvRowCoding keys = key_coding(h), values = value_coding();
      for (int64_t i = 0; i < n; ++i) {
        encode_kv_row(types_.keys, keys, k + i * row + g * head_dim_, head_dim_, scratch.data(), h.rows.at(0, end + i));
        encode_kv_row(types_.values, values, v + i * row + g * head_dim_, head_dim_, scratch.data(),
                      h.rows.at(1, end + i));
      }
      std::memcpy(h.positions.at(0, h.length()), positions, n * sizeof(int32_t));
      h.rows.grow(n);
      h.positions.grow(n);
    }
  };
  // A prompt's rows, head by head on the pool: each head's store is its own, and a
  // prompt's rows also fault in the pages they land on (bench/README.md, "Prompts on two
  // threads"). A few rows are not worth waking another thread for.
  if (pool != nullptr && n * row >= ThreadPool::kMinWorkPerChunk) {
    pool->parallel_for(n_head_kv_, 1, append_heads);
  } else {
    append_heads(0, n_head_kv_, 0);
  }
  bytes_held_ += n * n_head_kv_ * bytes_per_entry();
  peak_bytes_ = std::max(peak_bytes_, bytes_held_);
  auto& layer_peak = layer_peak_bytes_[static_cast<size_t>(layer)];
  layer_peak = std::max(layer_peak, layer_bytes(layer));
}

void KvCache::choose_key_shift(HeadStore& h, const float* k, int64_t row, int64_t n) const {
  h.key_shift.clear();
  if (!kv_cache_type_is_quantised(types_.keys) || n < kKeyShiftSamples) return;
  std::vector<double> sum(static_cast<size_t>(head_dim_), 0.0);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t d = 0; d < head_dim_; ++d) sum[d] += k[i * row + d];
  }
  h.key_shift.resize(static_cast<size_t>(head_dim_));
  for (int64_t d = 0; d < head_dim_; ++d) h.key_shift[d] = static_cast<float>(sum[d] / static_cast<double>(n));
}

void KvCache::recount() {
  bytes_held_ = 0;
  for (const auto& h : heads_) bytes_held_ += h.length() * bytes_per_entry();
}

void KvCache::check_indices(const HeadStore& h, int64_t layer, int64_t kv_head, const std::vector<int32_t>& indices,
                            const char* what) const {
  for (size_t i = 0; i < indices.size(); ++i) {
    if (indices[i] < 0 || indices[i] >= h.length() || (i > 0 && indices[i] <= indices[i - 1])) {
      fail("internal: {} on layer {} head {} needs increasing indices below {}, got {} at {}", what, layer, kv_head,
           h.length(), indices[i], i);
    }
  }
}

void KvCache::retain(int64_t layer, int64_t kv_head, const std::vector<int32_t>& indices) {
  HeadStore& h = head(layer, kv_head);
  // The indices between the kept ones, checking the kept ones on the way.
  std::vector<int32_t> dropped;
  int32_t next = 0;  // the first index not yet kept or dropped
  for (int32_t kept : indices) {
    if (kept < next || kept >= h.length()) check_indices(h, layer, kv_head, indices, "retain");  // fails
    for (; next < kept; ++next) dropped.push_back(next);
    next = kept + 1;
  }
  for (; next < h.length(); ++next) dropped.push_back(next);
  drop_entries(h, dropped, false);
}

void KvCache::erase(int64_t layer, int64_t kv_head, const std::vector<int32_t>& dropped) {
  HeadStore& h = head(layer, kv_head);
  check_indices(h, layer, kv_head, dropped, "erase");
  drop_entries(h, dropped, false);
}

void KvCache::erase_lazily(int64_t layer, int64_t kv_head, const std::vector<int32_t>& dropped) {
  HeadStore& h = head(layer, kv_head);
  check_indices(h, layer, kv_head, dropped, "erase");
  drop_entries(h, dropped, true);
}

void KvCache::drop_entries(HeadStore& h, const std::vector<int32_t>& dropped, bool lazily) {
  if (dropped.empty()) return;
  renew_version(h);
  // The dropped entries' rows (row_of_entry, in one pass over both ascending lists),
  // merged with the holes: entry j lies past the holes k with holes[k] - k <= j.
  std::vector<int32_t> holes;
  holes.reserve(h.holes.size() + dropped.size());
  size_t k = 0;
  for (int32_t j : dropped) {
    for (; k < h.holes.size() && h.holes[k] - static_cast<int32_t>(k) <= j; ++k) holes.push_back(h.holes[k]);
    holes.push_back(j + static_cast<int32_t>(k));
  }
  holes.insert(holes.end(), h.holes.begin() + static_cast<std::ptrdiff_t>(k), h.holes.end());
  h.holes = std::move(holes);
  h.positions.drop(dropped);
  if (!lazily || h.holes.size() > kMaxHoles) close_holes(h);
  bytes_held_ -= static_cast<int64_t>(dropped.size()) * bytes_per_entry();
}

void KvCache::close_holes(HeadStore& h) {
  h.rows.drop(h.holes);
  h.holes.clear();
}

void KvCache::renumber(int64_t layer, int64_t kv_head, int32_t first, const Rotary& rotary) {
  if (rotary.n_rot <= 0 || rotary.n_rot % 2 != 0 || rotary.n_rot > head_dim_) {
    fail("cannot re-rotate keys: the model's RoPE rotates {} of {} dimensions", rotary.n_rot, head_dim_);
  }
  HeadStore& h = head(layer, kv_head);
  close_holes(h);  // entry j is row j from here
  renew_version(h);
  const KvRowCoding coding = key_coding(h);
  auto* positions = reinterpret_cast<int32_t*>(h.positions.at(0, 0));
  std::vector<float> key(static_cast<size_t>(head_dim_)), scratch(static_cast<size_t>(head_dim_));
  KvRowReader reader(KvRows{h.rows.at(0, 0), types_.keys, head_dim_, h.holes, coding});
  for (int64_t j = 0; j < h.length(); ++j) {
    const int32_t to = first + static_cast<int32_t>(j);
    if (positions[j] == to) continue;
    const float* k = reader(j);  // copied before row j is written over
    std::copy(k, k + head_dim_, key.begin());
    rotary.rotate(key.data(), 1, head_dim_, to - positions[j]);
    encode_kv_row(types_.keys, coding, key.data(), head_dim_, scratch.data(), h.rows.at(0, j));
    positions[j] = to;
  }
}

void KvCache::truncate(int32_t position) {
  for (auto& h : heads_) {
    const auto* positions = reinterpret_cast<const int32_t*>(h.positions.at(0, 0));
    // Even with nothing dropped: entries another eviction removed at these positions may
    // come back as other tokens.
    roll_back(h, position);
    const int64_t kept = std::lower_bound(positions, positions + h.length(), position) - positions;
    // The rows before the first dropped entry's row, and the holes among them.
    const int64_t kept_rows = kept < h.length() ? row_of_entry(h.holes, kept) : h.rows.count();
    h.holes.erase(std::lower_bound(h.holes.begin(), h.holes.end(), kept_rows), h.holes.end());
    h.rows.shrink(kept_rows);
    h.positions.shrink(kept);
  }
  recount();
}

KvCache::Snapshot KvCache::snapshot() const {
  Snapshot s;
  s.types = types_;
  s.head_dim = head_dim_;
  const auto bytes_of = [](const KvRows& rows, int64_t n) {
    std::vector<uint8_t> out;
    out.reserve(static_cast<size_t>(n * rows.row_bytes()));
    rows.for_each_run(0, n, [&](int64_t, const uint8_t* run, int64_t count) {
      out.insert(out.end(), run, run + count * rows.row_bytes());
    });
    return out;
  };
  for (int64_t l = 0; l < n_layer_; ++l) {  // in heads_'s order
    for (int64_t g = 0; g < n_head_kv_; ++g) {
      const KvHeadView v = view(l, g);
      s.lengths.push_back(v.length);
      s.keys.push_back(bytes_of(v.keys, v.length));
      s.values.push_back(bytes_of(v.values, v.length));
      s.positions.emplace_back(v.positions, v.positions + v.length);
      s.key_shifts.push_back(head(l, g).key_shift);
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
  const bool shifts_fit = s.key_shifts.size() == heads_.size() &&
                          std::all_of(s.key_shifts.begin(), s.key_shifts.end(), [&](const std::vector<float>& shift) {
                            return shift.empty() || static_cast<int64_t>(shift.size()) == head_dim_;
                          });
  if (!shifts_fit) {
    fail("cannot restore a KV snapshot whose key shifts do not fit the cache (one per head, of {} values or none)",
         head_dim_);
  }
  for (size_t i = 0; i < heads_.size(); ++i) {
    HeadStore& h = heads_[i];
    const int64_t n = s.lengths[i];
    roll_back(h, std::numeric_limits<int32_t>::min());  // every entry may be another token
    h.holes.clear();
    h.rows.reset();
    h.positions.reset();
    h.key_shift = s.key_shifts[i];
    // An empty head's vectors may hold no buffer at all, which memcpy must not be given.
    if (n > 0) {
      std::memcpy(h.rows.at(0, 0), s.keys[i].data(), s.keys[i].size());
      std::memcpy(h.rows.at(1, 0), s.values[i].data(), s.values[i].size());
      std::memcpy(h.positions.at(0, 0), s.positions[i].data(), s.positions[i].size() * sizeof(int32_t));
    }
    for (SlotWindow* w : {&h.rows, &h.positions}) {
      w->grow(n);
      w->shrink(n);  // returns the pages past the restored entries
    }
  }
  recount();
  peak_bytes_ = std::max(peak_bytes_, bytes_held_);
  for (int64_t l = 0; l < n_layer_; ++l) {
    auto& layer_peak = layer_peak_bytes_[static_cast<size_t>(l)];
    layer_peak = std::max(layer_peak, layer_bytes(l));
  }
}

}  // namespace deferkv
