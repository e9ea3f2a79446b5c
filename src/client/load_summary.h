#pragma once
// What a load run (load_generator.h) comes to: throughput, latency percentiles, KV bytes,
// how many requests ran at once, and the errors.
#include <cstdint>
#include <string>
#include <vector>

#include "client/load_generator.h"

namespace deferkv::client {

// The p-th percentile (0-100) of `values`, interpolating linearly between the two nearest
// ranks (rank p/100 * (n-1), counted from 0: numpy's default). NaN for no values.
double percentile(std::vector<double> values, double p);

struct Percentiles {
  double p50 = 0, p90 = 0, p99 = 0, mean = 0, max = 0;  // NaN when no request succeeded
};
Percentiles percentiles_of(const std::vector<double>& values);

struct LoadSummary {
  int64_t requests = 0;   // sent
  int64_t succeeded = 0;
  int64_t failed = 0;
  double wall_seconds = 0;
  double requests_per_second = 0;          // succeeded / wall
  int64_t prompt_tokens = 0;               // of the succeeded ones (usage.prompt_tokens)
  int64_t generated_tokens = 0;            // usage.completion_tokens
  double generated_tokens_per_second = 0;  // over the wall time, all clients together
  Percentiles ttft_seconds;                // to the first chunk with text
  Percentiles latency_seconds;             // to the stream's end
  int64_t max_request_kv_peak_bytes = 0;   // the largest usage.kv_peak_bytes of one request (0: not reported)
  ServerPeaks server;                      // from /metrics
  std::vector<std::string> errors;         // each distinct error once, with its count: "3 × HTTP 400: …"
};

LoadSummary summarize(const LoadRun& run);

}  // namespace deferkv::client
