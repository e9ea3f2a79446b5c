#include "deferkv/generation_params.h"

#include <cmath>

#include <fmt/format.h>

namespace deferkv {
namespace {

template <typename... Args>
[[noreturn]] void refuse(const char* param, fmt::format_string<Args...> format, Args&&... args) {
  throw ParameterError(param, fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace

void check_max_tokens(int64_t max_tokens, const char* name) {
  if (max_tokens < 1 || max_tokens > kMaxNewTokens) {
    refuse(name, "{} must be between 1 and {}, got {}", name, kMaxNewTokens, max_tokens);
  }
}

void check_sampling(const SamplerParams& s) {
  if (!std::isfinite(s.temperature) || s.temperature < 0 || s.temperature > 100) {
    refuse("temperature", "temperature must be in [0, 100] (0: greedy), got {}", s.temperature);
  }
  if (s.top_k < 0 || s.top_k > kMaxTopK) refuse("top_k", "top_k must be between 0 (off) and {}, got {}", kMaxTopK, s.top_k);
  if (!std::isfinite(s.top_p) || s.top_p <= 0 || s.top_p > 1) refuse("top_p", "top_p must be in (0, 1], got {}", s.top_p);
  if (!std::isfinite(s.min_p) || s.min_p < 0 || s.min_p >= 1) refuse("min_p", "min_p must be in [0, 1), got {}", s.min_p);
  s.validate();  // what else the sampler needs (the repetition penalty's ranges)
}

void check_seed(int64_t seed) {
  if (seed < 0) refuse("seed", "seed must be >= 0, got {}", seed);
}

void check_stop(const std::vector<std::string>& stop) {
  for (const std::string& s : stop) {
    if (s.empty()) refuse("stop", "stop strings must not be empty (an empty one would end the text at once)");
  }
  if (stop.size() > kMaxStopStrings) refuse("stop", "stop holds at most {} strings, got {}", kMaxStopStrings, stop.size());
}

void check_role(const std::string& role) {
  if (role != "system" && role != "user" && role != "assistant") {
    refuse("messages", "a message's role must be system, user or assistant, got '{}'", role);
  }
}

void check_budget(const std::string& press, std::optional<int64_t> kv_budget, std::optional<double> kv_ratio) {
  if (kv_budget && kv_ratio) refuse("kv_budget", "give kv_budget or kv_ratio, not both");
  if (kv_budget && (*kv_budget < 1 || *kv_budget > kMaxKvBudget)) {
    refuse("kv_budget", "kv_budget must be between 1 and {} entries per KV head, got {}", kMaxKvBudget, *kv_budget);
  }
  if (kv_ratio && !(*kv_ratio >= 0 && *kv_ratio <= 0.999)) {
    refuse("kv_ratio", "kv_ratio must be in [0, 0.999], got {}", *kv_ratio);
  }
  if (press == "full" && (kv_budget || kv_ratio)) {
    refuse("press", "kv_budget and kv_ratio need a press other than full");
  }
}

}  // namespace deferkv
