#pragma once
// Causal multi-head attention over a ragged per-KV-head cache (GQA: query head h
// reads KV head h / group).
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "kernels/kv_rows.h"

namespace deferkv {

class ThreadPool;

// A rollback of a KV head (KvCache::truncate, restore): from `version` on, its entries at
// `position` or later may be other tokens than the ones held there before.
struct KvRollback {
  uint64_t version;
  int32_t position;
};

// One KV head's stored entries: length keys and values of head_dim in their storage
// types (rows that may have holes between them, KvRows::holes), and the original
// position of each (ascending).
struct KvHeadView {
  KvRows keys;
  KvRows values;
  const int32_t* positions;
  int64_t length;
  // Changes, to a value larger than any head of any cache has had, whenever the head loses
  // entries; appends keep it. A reader that saw the first k entries under one version sees
  // the same first k entries while the version holds (0: unknown, never equal to a head's).
  uint64_t version = 0;
  // The head's rollbacks, versions and positions both increasing (a later rollback to an
  // earlier position replaces those after it).
  std::span<const KvRollback> rollbacks;

  // The first position whose entry may be another token than under version `since`
  // (INT32_MAX: none): entries below it that both versions hold are the same tokens.
  int32_t refilled_from(uint64_t since) const {
    for (const KvRollback& r : rollbacks) {
      if (r.version > since) return r.position;
    }
    return std::numeric_limits<int32_t>::max();
  }
};

struct AttentionShape {
  int64_t n_head;
  int64_t n_head_kv;
  int64_t head_dim;
  float scale;  // usually 1/sqrt(head_dim)
};

// Per-thread scratch for attention, sized once per session.
struct AttentionScratch {
  std::vector<std::vector<float>> scores;  // one [block_rows x capacity] buffer per thread
  std::vector<std::vector<float>> tiles;   // one kKvTileFloats buffer per thread (kv_rows.h)
  // Set by the caller: a decode step (n == 1) also keeps its attention probabilities
  // here, per KV head g [group x length of g]: query head g * group + a's softmax over j of
  // scale * q . k_j at a * length + j, for observers that would otherwise compute them
  // again (AttentionEvent::probabilities). The attention computes them in that buffer, so
  // keeping them costs no copy.
  bool keep_decode_probabilities = false;
  std::vector<std::vector<float>> decode_probabilities;
  void reserve(int n_threads, int64_t capacity);
};

// The decode attention's probabilities of `heads` query rows (queries: [heads x head_dim])
// over one KV head: probs[r * length + j] = softmax over the first `visible` entries of
// scale * q_r . k_j, 0 past them. The attention computes its decode step with this, so an
// observer that computes them again gets the same floats. tile: kKvTileFloats floats.
void attention_probabilities(const float* queries, int64_t heads, const KvHeadView& kv, int64_t head_dim,
                             float scale, int64_t visible, float* probs, float* tile);

// queries/out: [n, n_head * head_dim]. Products in float32 against the stored rows
// (dequantised a tile at a time unless f32). The batch's own n tokens are the last n entries
// of every KV head; query i sees the entries before them and batch tokens 0..i.
void attention(const float* queries, int64_t n, const AttentionShape& shape,
               const std::vector<KvHeadView>& kv_heads, float* out, AttentionScratch& scratch,
               ThreadPool& pool);

}  // namespace deferkv
