#include "client/load_summary.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include <fmt/format.h>

namespace deferkv::client {

double percentile(std::vector<double> values, double p) {
  if (values.empty()) return std::numeric_limits<double>::quiet_NaN();
  std::sort(values.begin(), values.end());
  const double rank = std::clamp(p, 0.0, 100.0) / 100.0 * static_cast<double>(values.size() - 1);
  const size_t below = static_cast<size_t>(std::floor(rank));
  const size_t above = std::min(below + 1, values.size() - 1);
  const double fraction = rank - static_cast<double>(below);
  return values[below] + (values[above] - values[below]) * fraction;
}

Percentiles percentiles_of(const std::vector<double>& values) {
  Percentiles p;
  p.p50 = percentile(values, 50);
  p.p90 = percentile(values, 90);
  p.p99 = percentile(values, 99);
  p.max = percentile(values, 100);
  double sum = 0;
  for (double v : values) sum += v;
  p.mean = values.empty() ? std::numeric_limits<double>::quiet_NaN() : sum / static_cast<double>(values.size());
  return p;
}

namespace {

int64_t usage_field(const nlohmann::json& usage, const char* name) {
  return usage.is_object() && usage.contains(name) && usage[name].is_number_integer() ? usage[name].get<int64_t>() : 0;
}

}  // namespace

LoadSummary summarize(const LoadRun& run) {
  LoadSummary s;
  s.requests = static_cast<int64_t>(run.requests.size());
  s.wall_seconds = run.wall_seconds;
  s.server = run.server;
  std::vector<double> ttft;
  std::vector<double> latency;
  std::map<std::string, int64_t> error_counts;
  for (const SentRequest& r : run.requests) {
    const StreamedAnswer& a = r.answer;
    if (!a.error.empty()) {
      ++s.failed;
      ++error_counts[a.error];
      continue;
    }
    ++s.succeeded;
    s.prompt_tokens += usage_field(a.usage, "prompt_tokens");
    s.generated_tokens += usage_field(a.usage, "completion_tokens");
    s.max_request_kv_peak_bytes = std::max(s.max_request_kv_peak_bytes, usage_field(a.usage, "kv_peak_bytes"));
    if (a.first_token_seconds >= 0) ttft.push_back(a.first_token_seconds);
    latency.push_back(a.seconds);
  }
  s.ttft_seconds = percentiles_of(ttft);
  s.latency_seconds = percentiles_of(latency);
  if (s.wall_seconds > 0) {
    s.requests_per_second = static_cast<double>(s.succeeded) / s.wall_seconds;
    s.generated_tokens_per_second = static_cast<double>(s.generated_tokens) / s.wall_seconds;
  }
  for (const auto& [error, count] : error_counts) s.errors.push_back(fmt::format("{} × {}", count, error));
  return s;
}

}  // namespace deferkv::client
