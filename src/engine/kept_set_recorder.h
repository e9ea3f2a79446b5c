#pragma once
// The KV cache's kept set after eviction, as `generate` and `eval` report it: which original
// positions each (layer, KV head) kept, how many of the positions fed that is, the JSON lines
// of --dump-kept, the "kept" part of --stats-json and the summary line on stderr.
#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "deferkv/embedding.h"
#include "deferkv/generate.h"

namespace deferkv {

// Follows a generation and keeps the cache's kept set as it was right after the last
// eviction (taken at the end of the prefill, and again whenever a decode step evicted), so
// the tokens decoded after it are not in it. With no eviction it is the whole prompt.
class KeptSetRecorder {
 public:
  // Takes the set at the end of the prefill (after options.after_prefill, which it keeps).
  void attach(GenerateOptions& options);
  // Takes the set again when the session evicted since: call it from the token callback
  // and once generate() returned.
  void update(const Session& session);

  const KeptSet& kept() const { return kept_; }
  // The decode step of the eviction the set follows (0: the end of the prefill); unset when
  // nothing was evicted.
  std::optional<int64_t> decode_step() const { return decode_step_; }

 private:
  bool taken_ = false;
  KeptSet kept_;
  std::optional<int64_t> decode_step_;
  std::optional<std::pair<int64_t, int64_t>> eviction_seen_;  // (decode step, n_past) of the last one
};

// {"tokens", "decode_step", "per_head": {"mean", "min", "max"}, "evicted_percent", "layers":
// [{"kept", "total", "evicted_percent", "heads": [{"kept", "evicted_percent"}, ...]}, ...]}.
nlohmann::ordered_json kept_stats_json(const KeptSetRecorder& recorder);

// "kept 64 of 1532 entries per head on average (95.8% evicted); per head min 40 max 90".
std::string kept_summary_line(const KeptSet& kept);

// One JSON object a line per (layer, KV head), layers then heads in order:
// {"layer", "kv_head", "tokens", "decode_step", "kept", "positions": [ascending]}.
void write_kept_dump(const std::string& path, const KeptSetRecorder& recorder);

}  // namespace deferkv
