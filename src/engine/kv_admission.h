#pragma once
// Admission by KV bytes under one memory cap. A request reserves its projected peak: the
// full cache holds prompt + generated tokens; a press with a budget holds the whole prompt
// until it evicts, then its kept entries plus the generated tokens. A press that evicts
// each layer as soon as the whole prompt has passed it (it declares that it acts there and
// not at the prompt's end: PressPoints::evicts_each_prompt_layer) holds the
// whole prompt in one layer at a time, beside the budgets of the layers before it. Once it
// has evicted, its reservation shrinks to the part that stays, so eviction admits waiting
// requests.
//
// A press that keeps more than its budget (whole layers or heads, per-layer ratios) says how
// much in Press::holding().kept, which the engine passes here in place of the budget.
//
// The budgets of all layers together are taken as n_layer x kept entries per head, as every
// allocation rule shares them out (allocation.h); the prefill's peak counts all of them
// beside the last layer's whole prompt, one layer's budget more than it can hold.
//
// [OUR FORMULATION] A press whose trigger is decode step d (DeferKV) holds the prompt plus
// d tokens until then; the projection counts the prompt only (d is a few tokens and the
// Press interface does not expose it).
//
// A deferred press with a candidate pool (Press::candidate_pool: DeferKV's pool=P) cuts each
// layer to its pool as the prompt passes it: its prefill holds one layer's whole prompt
// beside every layer's pool (counted as for the budgets, n_layer x pool), then the pool
// (plus the d tokens, not counted, as above) until step d, then its budget.
//
// A sequence started from a deferred compressed context (DeferKV's, mode kDeferred) holds
// a copy of the context's pool beside its question and tokens until its step d, then the
// budget the resumed press chooses (BatchEngine::project_request).
#include <cstdint>

namespace deferkv {

struct KvProjection {
  int64_t peak_bytes = 0;        // reserved at admission
  int64_t after_pool = 0;        // reserved once a pooled press has cut the prompt to its pool
  int64_t after_eviction = 0;    // reserved once the press has evicted (to its budget)
};

// bytes_per_token: one token's KV over all n_layer layers and every KV head. kept_per_head:
// the entries a press keeps per KV head (< 0: no press, the full cache). evicts_each_layer:
// the press evicts each layer at the prompt's end in it (PressPoints::evicts_each_prompt_layer),
// to its budget, or to pool_per_head entries when it has a pool (>= 0; -1: none).
KvProjection project_kv(int64_t bytes_per_token, int64_t n_layer, int64_t prompt_tokens, int64_t max_tokens,
                        int64_t kept_per_head, bool evicts_each_layer, int64_t pool_per_head = -1);

// The reservations of admitted requests against the capacity. Not thread-safe: the
// scheduler holds its lock around it.
class KvAdmission {
 public:
  explicit KvAdmission(int64_t capacity_bytes) : capacity_(capacity_bytes) {}
  int64_t capacity() const { return capacity_; }
  int64_t reserved() const { return reserved_; }
  bool can_ever_fit(int64_t bytes) const { return bytes <= capacity_; }
  bool fits(int64_t bytes) const { return reserved_ + bytes <= capacity_; }
  void reserve(int64_t bytes) { reserved_ += bytes; }
  void release(int64_t bytes) { reserved_ -= bytes; }

 private:
  int64_t capacity_;
  int64_t reserved_ = 0;
};

}  // namespace deferkv
