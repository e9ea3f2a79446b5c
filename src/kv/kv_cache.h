#pragma once
// The KV cache: keys (after RoPE) and values stored per (layer, KV head), each head
// with its own length and the original position of every entry. Heads can hold
// different numbers of entries (ragged), so eviction methods can compact one head
// without touching the others; the attention kernels read each head's own length.
#include <cstddef>
#include <cstdint>
#include <vector>

namespace deferkv {

class KvCache {
 public:
  // capacity: the most entries one head will hold (the context size); memory is
  // reserved virtually, pages are touched only as entries arrive.
  KvCache(int64_t n_layer, int64_t n_head_kv, int64_t head_dim, int64_t capacity);

  int64_t n_layer() const { return n_layer_; }
  int64_t n_head_kv() const { return n_head_kv_; }
  int64_t head_dim() const { return head_dim_; }
  int64_t capacity() const { return capacity_; }

  // Appends n entries to every head of `layer`. k and v are [n, n_head_kv * head_dim]
  // row-major (the layout the projections produce).
  void append(int64_t layer, const float* k, const float* v, const int32_t* positions, int64_t n);

  int64_t length(int64_t layer, int64_t kv_head) const { return head(layer, kv_head).positions.size(); }
  const float* keys(int64_t layer, int64_t kv_head) const { return head(layer, kv_head).keys.data(); }
  const float* values(int64_t layer, int64_t kv_head) const { return head(layer, kv_head).values.data(); }
  const int32_t* positions(int64_t layer, int64_t kv_head) const {
    return head(layer, kv_head).positions.data();
  }
  // Drops every entry whose position is >= `position` (rollback to a shorter context).
  void truncate(int32_t position);


  // Bytes held by the stored entries (keys, values, positions), now and at peak.
  int64_t bytes_held() const { return bytes_held_; }
  int64_t peak_bytes() const { return peak_bytes_; }
  int64_t bytes_per_entry() const;

 private:
  struct HeadStore {
    std::vector<float> keys;
    std::vector<float> values;
    std::vector<int32_t> positions;
  };
  HeadStore& head(int64_t layer, int64_t kv_head) {
    return heads_[static_cast<size_t>(layer * n_head_kv_ + kv_head)];
  }
  const HeadStore& head(int64_t layer, int64_t kv_head) const {
    return heads_[static_cast<size_t>(layer * n_head_kv_ + kv_head)];
  }

  int64_t n_layer_, n_head_kv_, head_dim_, capacity_;
  std::vector<HeadStore> heads_;
  int64_t bytes_held_ = 0;
  int64_t peak_bytes_ = 0;
};

}  // namespace deferkv
