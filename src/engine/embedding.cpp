#include "deferkv/embedding.h"

#include "base/resource_dir.h"
#include "base/thread_pool.h"
#include "deferkv/error.h"
#include "deferkv/session.h"
#include "engine/session_internals.h"
#include "kv/kv_cache.h"
#include "kv/kv_cache_type.h"

namespace deferkv {

std::shared_ptr<ThreadPool> make_thread_pool(int n_threads) { return std::make_shared<ThreadPool>(n_threads); }

int default_thread_count() { return ThreadPool::default_threads(); }

std::string embedded_model_path() { return resource_dir() + "/models/stories260K.gguf"; }

std::string embedded_eval_model_path() { return resource_dir() + "/models/deferkv-retrieval-5m.gguf"; }

void check_kv_cache_type_name(const std::string& name) { kv_cache_type_from_name(name); }

namespace {

void check_head(const KvCache& kv, int64_t layer, int64_t kv_head) {
  if (layer < 0 || layer >= kv.n_layer()) {
    fail("layer {} is out of range: the model has {} layers (0..{})", layer, kv.n_layer(), kv.n_layer() - 1);
  }
  if (kv_head < 0 || kv_head >= kv.n_head_kv()) {
    fail("KV head {} is out of range: the model has {} KV heads (0..{})", kv_head, kv.n_head_kv(), kv.n_head_kv() - 1);
  }
}

}  // namespace

std::vector<int32_t> kv_positions(const Session& session, int64_t layer, int64_t kv_head) {
  const KvCache& kv = kv_cache_of(session);
  check_head(kv, layer, kv_head);
  const int32_t* positions = kv.positions(layer, kv_head);
  return {positions, positions + kv.length(layer, kv_head)};
}

std::vector<float> kv_rows(const Session& session, int64_t layer, int64_t kv_head, KvPart part) {
  const KvCache& kv = kv_cache_of(session);
  check_head(kv, layer, kv_head);
  const KvRows rows = part == KvPart::kKeys ? kv.keys(layer, kv_head) : kv.values(layer, kv_head);
  const int64_t n = kv.length(layer, kv_head);
  std::vector<float> out(static_cast<size_t>(n * kv.head_dim()));
  if (n > 0) rows.to_f32(0, n, out.data());
  return out;
}

KeptSet kept_set(const Session& session) {
  const KvCache& kv = kv_cache_of(session);
  KeptSet kept{kv.n_layer(), kv.n_head_kv(), session.n_past(), {}};
  for (int64_t l = 0; l < kv.n_layer(); ++l) {
    for (int64_t h = 0; h < kv.n_head_kv(); ++h) kept.positions.push_back(kv_positions(session, l, h));
  }
  return kept;
}

}  // namespace deferkv
