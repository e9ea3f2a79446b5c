#include "deferkv/embedding.h"

#include "base/resource_dir.h"
#include "base/thread_pool.h"
#include "deferkv/session.h"
#include "kv/kv_cache.h"

namespace deferkv {

std::shared_ptr<ThreadPool> make_thread_pool(int n_threads) { return std::make_shared<ThreadPool>(n_threads); }

std::string embedded_model_path() { return resource_dir() + "/models/stories260K.gguf"; }

KvStats kv_stats(const Session& session) {
  const KvCache& kv = session.kv_cache();
  KvStats stats;
  stats.n_layer = kv.n_layer();
  stats.n_head_kv = kv.n_head_kv();
  stats.bytes_per_entry = kv.bytes_per_entry();
  stats.bytes = kv.bytes_held();
  stats.peak_bytes = kv.peak_bytes();
  for (int64_t l = 0; l < kv.n_layer(); ++l) {
    for (int64_t h = 0; h < kv.n_head_kv(); ++h) stats.entries.push_back(kv.length(l, h));
  }
  return stats;
}

KeptSet kept_set(const Session& session) {
  const KvCache& kv = session.kv_cache();
  KeptSet kept{kv.n_layer(), kv.n_head_kv(), session.n_past(), {}};
  for (int64_t l = 0; l < kv.n_layer(); ++l) {
    for (int64_t h = 0; h < kv.n_head_kv(); ++h) {
      const int32_t* p = kv.positions(l, h);
      kept.positions.emplace_back(p, p + kv.length(l, h));
    }
  }
  return kept;
}

}  // namespace deferkv
