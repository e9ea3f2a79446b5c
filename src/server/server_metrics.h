#pragma once
// The counters behind GET /metrics, written in Prometheus' text format (version 0.0.4).
#include <array>
#include <cstdint>
#include <mutex>
#include <string>

#include "server/scheduler.h"

namespace deferkv::server {

// A cumulative histogram of seconds with fixed bucket bounds.
class LatencyHistogram {
 public:
  void observe(double seconds);
  // The `name_bucket`, `name_sum` and `name_count` lines.
  std::string render(const std::string& name, const std::string& help) const;

 private:
  static constexpr std::array<double, 10> kBounds{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
  std::array<int64_t, kBounds.size()> counts_{};  // observations <= each bound
  int64_t count_ = 0;
  double sum_ = 0;
};

class ServerMetrics {
 public:
  void record_request(const GenerationUsage& usage, double first_token_seconds, double total_seconds,
                      bool has_first_token);
  std::string render(const SchedulerStats& stats) const;

 private:
  mutable std::mutex mutex_;
  int64_t requests_ = 0;
  int64_t prompt_tokens_ = 0;
  int64_t generated_tokens_ = 0;
  LatencyHistogram first_token_;
  LatencyHistogram latency_;
};

}  // namespace deferkv::server
