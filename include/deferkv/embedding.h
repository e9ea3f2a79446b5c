#pragma once
// What a program embedding deferkv (the Python module) needs beyond session.h without
// reaching into src/: a thread pool to build a Session with, the embedded default
// model, and the KV cache's statistics per layer and KV head.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace deferkv {

class Session;
class ThreadPool;

std::shared_ptr<ThreadPool> make_thread_pool(int n_threads);

// models/stories260K.gguf in the resource folder (src/base/resource_dir.h's rule).
std::string embedded_model_path();

struct KvStats {
  int64_t n_layer = 0;
  int64_t n_head_kv = 0;
  int64_t bytes_per_entry = 0;
  int64_t bytes = 0;       // held now
  int64_t peak_bytes = 0;  // the most held at once
  std::vector<int64_t> entries;  // [n_layer * n_head_kv], entries each head holds now
};
KvStats kv_stats(const Session& session);

}  // namespace deferkv
