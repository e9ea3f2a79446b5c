#pragma once
// What a CompressedContext holds of the cache: its rows as a KvCache snapshot (the stored
// bytes of every kept entry, their positions, each head's key shift), and the logits of the
// context's last token, which a session started from it samples from when no question follows.
#include <cstdint>
#include <vector>

#include "deferkv/compressed_context.h"
#include "kv/kv_cache.h"

namespace deferkv {

struct CompressedContext::State {
  int64_t n_layer = 0;
  int64_t n_head_kv = 0;
  KvCache::Snapshot kv;  // heads in layer-major order, as KvCache::snapshot() lists them
  std::vector<float> logits;
};

}  // namespace deferkv
