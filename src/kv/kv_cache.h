#pragma once
// The KV cache: keys (after RoPE) and values stored per (layer, KV head), each head
// with its own length and the original position of every entry. Heads can hold
// different numbers of entries (ragged), so eviction methods compact one head without
// touching the others; the attention kernels read each head's own length.
//
// Keys and values are stored in their own types (kv_cache_type.h): a row of head_dim
// values per entry, quantised blocks running along the row, so retain() moves whole
// entries byte for byte and never re-rounds them.
//
// A head's entries lie contiguous, in position order, in a window of slots that can
// start anywhere in its storage: eviction closes the gaps by moving whichever side of
// the dropped entries is shorter, the entries after them forward or the entries before
// them back (the window's start then advances). A sliding window that drops its oldest
// entry after a few sinks moves the sinks only, not the whole window; a per-step press
// that drops one entry anywhere moves at most half the head. Storage is reserved for
// twice the context, and a head whose window reaches the end moves back to slot 0 at
// the next append: at most one entry moved per entry dropped before, however long the
// run. Attention reads the same entries in the same order either way, so its results do
// not depend on where the window starts.
//
// Each head has a version (KvHeadView::version), renewed whenever it loses entries, and a
// record of its rollbacks (truncate, restore), so what a reader saw of a head (a press's
// captured attention) can be matched to it again cheaply: under the same version only
// appends happened.
//
// Each head's storage is reserved up front and committed by the OS page by page as
// entries arrive; retain(), erase() and truncate() hand the freed pages back, so evicting
// entries lowers real memory, not only the byte counters. Pages go back in batches: a
// head returns its unused tail (or its unused slots before the window) once they span
// kReleaseBatchBytes of keys and values, not at every shrink. A per-step press that drops
// one entry and appends one would otherwise release a page and fault it in again (~10 µs
// on these VMs) whenever its length sits at a page boundary; so at most that many bytes
// per head stay resident on either side of the entries held.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "base/reserved_buffer.h"
#include "kernels/attention.h"
#include "kv/kv_cache_type.h"

namespace deferkv {

class KvCache {
 public:
  // capacity: the most entries one head will hold (the context size). Fails when a
  // type cannot store heads of head_dim values (check_kv_cache_type).
  KvCache(int64_t n_layer, int64_t n_head_kv, int64_t head_dim, int64_t capacity, KvCacheTypes types = {});

  int64_t n_layer() const { return n_layer_; }
  int64_t n_head_kv() const { return n_head_kv_; }
  int64_t head_dim() const { return head_dim_; }
  int64_t capacity() const { return capacity_; }
  const KvCacheTypes& types() const { return types_; }

  // Appends n entries to every head of `layer`. k and v are [n, n_head_kv * head_dim]
  // row-major (the layout the projections produce), rounded to the storage types. Fails, changing nothing, when a
  // head would exceed the capacity.
  void append(int64_t layer, const float* k, const float* v, const int32_t* positions, int64_t n);

  int64_t length(int64_t layer, int64_t kv_head) const { return head(layer, kv_head).length; }
  // The stored rows in their storage types (read them with KvRows::to_f32 or KvRowReader).
  KvRows keys(int64_t layer, int64_t kv_head) const;
  KvRows values(int64_t layer, int64_t kv_head) const;
  // Original positions, ascending within each head.
  const int32_t* positions(int64_t layer, int64_t kv_head) const;
  // Keys, values, positions, length and version of one head, as the attention kernels take it.
  KvHeadView view(int64_t layer, int64_t kv_head) const;
  // See KvHeadView::version.
  uint64_t version(int64_t layer, int64_t kv_head) const { return head(layer, kv_head).version; }

  // Keeps only the entries at `indices` (strictly increasing, each < length) of one
  // head, in order; the rest are freed.
  void retain(int64_t layer, int64_t kv_head, const std::vector<int32_t>& indices);
  // Drops the entries at `dropped` (strictly increasing, each < length) of one head: the
  // same as retain() of the other indices, in time proportional to the entries dropped and
  // those after the first of them or before the last, whichever are fewer (a per-step
  // press drops a few entries of a long head).
  void erase(int64_t layer, int64_t kv_head, const std::vector<int32_t>& dropped);
  // Drops every entry whose position is >= `position` (rollback to a shorter context).
  void truncate(int32_t position);

  // A full copy of the stored entries (their stored bytes), for checkpoint / rollback.
  struct Snapshot {
    KvCacheTypes types;
    int64_t head_dim = 0;
    std::vector<int64_t> lengths;
    std::vector<std::vector<uint8_t>> keys, values;
    std::vector<std::vector<int32_t>> positions;
  };
  Snapshot snapshot() const;
  // Puts the cache back to a snapshot taken from a cache of the same shape and types.
  void restore(const Snapshot& snapshot);

  // Bytes held by the stored entries (keys and values in their storage types, and the
  // int32 positions): total and per layer, now and at their peak.
  int64_t bytes_held() const { return bytes_held_; }
  int64_t peak_bytes() const { return peak_bytes_; }
  int64_t layer_bytes(int64_t layer) const;
  int64_t layer_peak_bytes(int64_t layer) const { return layer_peak_bytes_[static_cast<size_t>(layer)]; }
  int64_t bytes_per_entry() const { return key_row_bytes_ + value_row_bytes_ + int64_t{sizeof(int32_t)}; }
  int64_t key_row_bytes() const { return key_row_bytes_; }      // one entry's key in one head
  int64_t value_row_bytes() const { return value_row_bytes_; }
  int64_t entries(int64_t layer) const;  // summed over the layer's heads
  // Memory the OS backs the cache with right now (whole pages; for tests and reports).
  int64_t resident_bytes() const;
  // A head's unused tail of keys and values is handed back to the OS once it is this large.
  static constexpr int64_t kReleaseBatchBytes = 32 << 10;

 private:
  // Slots are entry-sized places in a head's storage; entries occupy [start, start + length).
  struct HeadStore {
    ReservedBuffer keys, values, positions;  // 2 x capacity slots each
    int64_t start = 0;
    int64_t length = 0;
    int64_t touched = 0;     // the highest slot end held since the tail's pages were last released
    int64_t unused_from = 0;  // slots below it before the window were released already
    uint64_t version = 0;     // KvHeadView::version
    std::vector<KvRollback> rollbacks;  // KvHeadView::rollbacks
  };
  HeadStore& head(int64_t layer, int64_t kv_head) {
    return heads_[static_cast<size_t>(layer * n_head_kv_ + kv_head)];
  }
  const HeadStore& head(int64_t layer, int64_t kv_head) const {
    return heads_[static_cast<size_t>(layer * n_head_kv_ + kv_head)];
  }
  // Sets a head's length; returns the pages past it to the OS once they are a batch.
  void shrink(HeadStore& h, int64_t length);
  // Gives a head that lost or replaced entries a new version.
  static void renew_version(HeadStore& h);
  // Gives a head a new version from which its entries at `position` or later may be other
  // tokens (a rollback).
  static void roll_back(HeadStore& h, int32_t position);
  // Drops entries (strictly increasing indices), moving the shorter side of them.
  void drop_entries(HeadStore& h, const std::vector<int32_t>& dropped);
  // Returns the pages before the window to the OS once they are a batch.
  void release_before_window(HeadStore& h);
  // Moves the window to slot 0, making room for appends.
  void move_to_front(HeadStore& h);
  // Moves `count` entries of a head from index `from` to index `to` (either way; indices
  // count from the window's start), as stored bytes.
  void move_entries(HeadStore& h, int64_t from, int64_t to, int64_t count);
  // Fails unless `indices` are strictly increasing and below the head's length.
  void check_indices(const HeadStore& h, int64_t layer, int64_t kv_head, const std::vector<int32_t>& indices,
                     const char* what) const;
  void recount();

  int64_t n_layer_, n_head_kv_, head_dim_, capacity_;
  KvCacheTypes types_;
  int64_t key_row_bytes_, value_row_bytes_;
  std::vector<HeadStore> heads_;
  int64_t bytes_held_ = 0;
  int64_t peak_bytes_ = 0;
  std::vector<int64_t> layer_peak_bytes_;
};

}  // namespace deferkv
