#pragma once
// What a run reports about its KV cache and timings (generate --stats-json).
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "deferkv/session.h"

namespace deferkv::cli {

// Prompt tokens, the KV cache's storage types, KV entries and bytes per layer after eviction, peak and current KV
// bytes, a deferred press's candidate pool (entries per head and bytes; null without one), the process's peak
// resident memory, and the prefill / capture / eviction / decode times.
nlohmann::json session_stats(const Session& session, int64_t prompt_tokens, int64_t generated_tokens);

// Writes JSON to a file (atomically: a temporary file, then a rename).
void write_json_file(const std::string& path, const nlohmann::json& value);

}  // namespace deferkv::cli
