#pragma once
// The KV cache: keys (after RoPE) and values stored per (layer, KV head), each head
// with its own length and the original position of every entry. Heads can hold
// different numbers of entries (ragged), so eviction methods compact one head without
// touching the others; the attention kernels read each head's own length.
//
// Keys and values are stored in their own types (kv_cache_type.h): a row of head_dim
// values per entry, quantised blocks running along the row, so eviction moves whole
// entries byte for byte and never re-rounds them.
//
// [OUR FORMULATION] Quantised rows (q8_0, q4_0) are stored rotated and keys also shifted
// (KvRowCoding, kv_rows.h): a row holds round(H (x - shift)), H the orthonormal
// Walsh-Hadamard transform over the row (hadamard.h); llama.cpp rounds x itself. A block's
// step is its largest magnitude / 127 (q8_0), so one large dimension coarsens the other
// 31; the rotation spreads it over the whole row. A head's keys tend to share a large
// part; the shift (the mean of the first keys the head stores) takes it out before
// rounding. Neither changes what the readers compute: a score q . x is (H q) . row +
// q . shift, the same q . shift for every key of a query (a softmax would cancel it; the
// scores include it all the same).
// What that gains in accuracy against an f32 cache is measured in bench/README.md
// ("KV-cache storage types", "Accuracy"). The bytes per entry are unchanged; the shift
// costs head_dim floats per head.
//
// A head keeps its cells' metadata (the positions, one per entry) apart from its tensor
// storage (the key and value rows), each in a SlotWindow (slot_window.h): entries in
// position order, gaps closed by moving the shorter side, pages handed back to the OS in
// batches, so evicting entries lowers real memory, not only the byte counters.
//
// Rows can lag behind the positions: erase_lazily() drops the entries' positions at once
// but leaves their rows in place as holes (KvRows::holes) until a head has more than
// kMaxHoles of them, then closes them all in one compaction. A per-step press that drops
// one entry anywhere in a 4K-entry head would otherwise move about a quarter of the head's
// rows every step; every reader of the rows walks the runs between the holes and sees
// the same entries in the same order (and the products the same floats, f32 values
// aside: kv_rows.h).
//
// Each head has a version (KvHeadView::version), renewed whenever it loses entries, and a
// record of its rollbacks (truncate, restore), so what a reader saw of a head (a press's
// captured attention) can be matched to it again cheaply: under the same version only
// appends happened.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/attention.h"
#include "kernels/rope.h"
#include "kv/kv_cache_type.h"
#include "kv/slot_window.h"

namespace deferkv {

class ThreadPool;

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
  // head would exceed the capacity. With a pool, several entries are written head by head on it.
  void append(int64_t layer, const float* k, const float* v, const int32_t* positions, int64_t n,
              ThreadPool* pool = nullptr);

  int64_t length(int64_t layer, int64_t kv_head) const { return head(layer, kv_head).length(); }
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
  // those after the first of them or before the last, whichever are fewer.
  void erase(int64_t layer, int64_t kv_head, const std::vector<int32_t>& dropped);
  // The same entries go, but their rows stay as holes until the head holds more than
  // kMaxHoles (then one compaction closes them all): for a press that drops a few entries
  // of a long head every decode step.
  void erase_lazily(int64_t layer, int64_t kv_head, const std::vector<int32_t>& dropped);
  // Rows a head leaves in place as holes before it compacts them: at 256 bytes a row (f16,
  // head_dim 64) 16 KiB per head, while a per-step press moves rows once per 64 steps.
  static constexpr size_t kMaxHoles = 64;
  // Key re-rotation (docs/methods/key_rerotation.md): moves entry j of one head to position
  // first + j, its key rotated by RoPE from its stored position to the new one (rotations
  // compose: R(q) = R(q - p) R(p)), so the head holds the keys a prefill at the new
  // positions would have stored from the same hidden states. The keys are rounded to their
  // storage type again; the values are untouched. Fails unless n_rot is even and within
  // head_dim.
  void renumber(int64_t layer, int64_t kv_head, int32_t first, const Rotary& rotary);
  // Drops every entry whose position is >= `position` (rollback to a shorter context).
  void truncate(int32_t position);

  // A full copy of the stored entries (their stored bytes), for checkpoint / rollback.
  struct Snapshot {
    KvCacheTypes types;
    int64_t head_dim = 0;
    std::vector<int64_t> lengths;
    std::vector<std::vector<uint8_t>> keys, values;
    std::vector<std::vector<int32_t>> positions;
    std::vector<std::vector<float>> key_shifts;  // each head's, as its key rows encode them
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
  static constexpr int64_t kReleaseBatchBytes = SlotWindow::kReleaseBatchBytes;

 private:
  struct HeadStore {
    SlotWindow rows;             // key rows (buffer 0) and value rows (buffer 1), holes included
    std::vector<int32_t> holes;  // rows erased lazily, ascending, indexed from the window's start
    SlotWindow positions;        // one int32 per entry
    uint64_t version = 0;        // KvHeadView::version
    std::vector<KvRollback> rollbacks;  // KvHeadView::rollbacks
    std::vector<float> key_shift;       // KvRowCoding::shift of the keys, or empty for none
    int64_t length() const { return positions.count(); }
  };
  HeadStore& head(int64_t layer, int64_t kv_head) {
    return heads_[static_cast<size_t>(layer * n_head_kv_ + kv_head)];
  }
  const HeadStore& head(int64_t layer, int64_t kv_head) const {
    return heads_[static_cast<size_t>(layer * n_head_kv_ + kv_head)];
  }
  // Gives a head that lost or replaced entries a new version.
  static void renew_version(HeadStore& h);
  // Gives a head a new version from which its entries at `position` or later may be other
  // tokens (a rollback).
  static void roll_back(HeadStore& h, int32_t position);
  // Drops entries (strictly increasing indices): their positions at once, their rows as
  // holes, compacted unless `lazily` and the head holds at most kMaxHoles.
  void drop_entries(HeadStore& h, const std::vector<int32_t>& dropped, bool lazily);
  // How a head's key rows and every head's value rows encode their entries (KvRowCoding).
  KvRowCoding key_coding(const HeadStore& h) const;
  KvRowCoding value_coding() const;
  // Keys a head must be given at once to take their mean as its shift; fewer give none.
  static constexpr int64_t kKeyShiftSamples = 16;
  // An empty head's shift for the n keys about to be appended (k: [n, n_head_kv * head_dim],
  // this head's at k[i * row]): their mean for quantised keys.
  void choose_key_shift(HeadStore& h, const float* k, int64_t row, int64_t n) const;
  // Moves a head's rows over its holes.
  static void close_holes(HeadStore& h);
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
