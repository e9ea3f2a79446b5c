#pragma once
// Admission by KV bytes under one memory cap. A request reserves its projected peak: the
// full cache holds prompt + generated tokens; a press with a budget holds the whole prompt
// until it evicts, then its kept entries plus the generated tokens. Once it has evicted,
// its reservation shrinks to the part that stays, so eviction admits waiting requests.
//
// [OUR FORMULATION] A press whose trigger is decode step d (DeferKV) holds the prompt plus
// d tokens until then; the projection counts the prompt only (d is a few tokens and the
// Press interface does not expose it).
#include <cstdint>

namespace deferkv {

struct KvProjection {
  int64_t peak_bytes = 0;        // reserved at admission
  int64_t after_eviction = 0;    // reserved once the press has evicted
};

// bytes_per_token: one token's KV over every layer and KV head. kept_per_head: the
// entries a press keeps per KV head (< 0: no press, the full cache).
KvProjection project_kv(int64_t bytes_per_token, int64_t prompt_tokens, int64_t max_tokens,
                        int64_t kept_per_head);

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
