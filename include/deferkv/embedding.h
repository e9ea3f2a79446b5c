#pragma once
// What a program embedding deferkv (the Python module) needs beyond session.h without
// reaching into src/: a thread pool to build a Session with, the embedded default
// model, the KV cache's statistics per layer and KV head, the positions it keeps, and one
// head's kept entries.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace deferkv {

class Session;
class ThreadPool;

std::shared_ptr<ThreadPool> make_thread_pool(int n_threads);
// The cores this process may use (its CPU affinity, capped by a cgroup quota): the CLI's -t default.
int default_thread_count();

// models/stories260K.gguf in the resource folder (src/base/resource_dir.h's rule).
std::string embedded_model_path();
// models/deferkv-retrieval-5m.gguf: the in-house retrieval model, `deferkv eval`'s default.
std::string embedded_eval_model_path();

// Fails unless `name` is a KV cache storage type (f32, f16, bf16, q8_0, q4_0), with an
// error listing them; SessionOptions::cache_type_k/v take these names.
void check_kv_cache_type_name(const std::string& name);


// One (layer, KV head) of the cache as it is now: the original positions of the entries it
// holds (ascending: eviction keeps the order), and their keys (after RoPE) or values as
// float32, [entries x head_dim], dequantised from the cache's storage type. An index out of
// range is an error naming it.
std::vector<int32_t> kv_positions(const Session& session, int64_t layer, int64_t kv_head);
enum class KvPart { kKeys, kValues };
std::vector<float> kv_rows(const Session& session, int64_t layer, int64_t kv_head, KvPart part);

// Every (layer, KV head)'s original positions in the cache at one moment, and how many
// positions had been fed by then (each head held all of them before any eviction).
struct KeptSet {
  int64_t n_layer = 0;
  int64_t n_head_kv = 0;
  int64_t tokens = 0;                           // Session::n_past() when taken
  std::vector<std::vector<int32_t>> positions;  // [layer * n_head_kv + kv_head], ascending
  const std::vector<int32_t>& head(int64_t layer, int64_t kv_head) const {
    return positions[static_cast<size_t>(layer * n_head_kv + kv_head)];
  }
};
KeptSet kept_set(const Session& session);

}  // namespace deferkv
