#include "run_stats.h"

#include <algorithm>
#include <cstdio>
#include <fstream>

#include "base/memory_stats.h"
#include "deferkv/error.h"

namespace deferkv::cli {

nlohmann::json session_stats(const Session& session, int64_t prompt_tokens, int64_t generated_tokens) {
  const KvStats kv = session.kv_stats();
  const SessionTimings& t = session.timings();
  nlohmann::json layers = nlohmann::json::array();
  for (const KvLayerStats& l : kv.layers) {
    layers.push_back({{"entries", l.entries}, {"bytes", l.bytes}, {"peak_bytes", l.peak_bytes}});
  }
  nlohmann::json eviction = nullptr;
  if (const auto& e = session.last_eviction()) {
    nlohmann::json per_layer = nlohmann::json::array();
    for (size_t l = 0; l < e->layer_entries.size(); ++l) {
      per_layer.push_back({{"entries", e->layer_entries[l]}, {"bytes", e->layer_bytes[l]}});
    }
    eviction = {{"decode_step", e->decode_step}, {"n_past", e->n_past}, {"bytes", e->bytes}, {"layers", per_layer}};
  }
  // A deferred press's candidate pool (DeferKV's pool=P): entries per KV head, and their
  // bytes over every layer, held from the prompt's layer ends until step d.
  nlohmann::json pool = nullptr;
  const int64_t p = session.press() != nullptr
                        ? session.press()->holding(press_shape(session.model().config()), prompt_tokens).pool
                        : -1;
  if (p >= 0) {
    pool = {{"entries_per_head", p},
            {"bytes", std::min(p, prompt_tokens) * kv.n_head_kv * kv.n_layer * kv.bytes_per_entry}};
  }
  return {
      {"press", session.press() != nullptr ? session.press()->describe() : "full"},
      {"candidate_pool", pool},
      {"prompt_tokens", prompt_tokens},
      {"generated_tokens", generated_tokens},
      {"kv", {{"n_layer", kv.n_layer},
              {"n_head_kv", kv.n_head_kv},
              {"cache_type_k", kv.cache_type_k},
              {"cache_type_v", kv.cache_type_v},
              {"bytes_per_entry", kv.bytes_per_entry},
              {"bytes", kv.bytes},
              {"peak_bytes", kv.peak_bytes},
              {"layers", layers}}},
      {"after_eviction", eviction},
      {"peak_rss_bytes", peak_rss_bytes()},
      {"seconds", {{"prefill", t.prefill_seconds},
                   {"capture", t.capture_seconds},
                   {"eviction", t.eviction_seconds},
                   {"lookahead", t.lookahead_seconds},
                   {"decode", t.decode_seconds}}},
      {"decode_tokens_per_second", t.decode_tokens / std::max(t.decode_seconds, 1e-9)},
  };
}

void write_json_file(const std::string& path, const nlohmann::json& value) {
  const std::string temporary = path + ".tmp";
  {
    std::ofstream out(temporary);
    if (!out) fail("cannot write '{}'", temporary);
    out << value.dump(2) << '\n';
    if (!out) fail("cannot write '{}'", temporary);
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) fail("cannot rename '{}' to '{}'", temporary, path);
}

}  // namespace deferkv::cli
