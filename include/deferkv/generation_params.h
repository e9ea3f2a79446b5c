#pragma once
// The checks of what a generation is asked for, in one place below both front ends: the
// server's request parsing and the Python bindings call them, so they refuse the same
// values with the same messages (before, each kept its own ranges and they disagreed).
// Each refusal is a ParameterError naming the parameter as the APIs spell it
// ("max_tokens", "temperature", "stop", "press", ...), never a CLI flag; the server wraps
// it into a 400 with that `param`, Python into a ValueError.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "deferkv/error.h"
#include "deferkv/sampler.h"

namespace deferkv {

class ParameterError : public Error {
 public:
  ParameterError(std::string param, const std::string& message) : Error(message), param_(std::move(param)) {}
  const std::string& param() const { return param_; }

 private:
  std::string param_;
};

inline constexpr int64_t kMaxNewTokens = int64_t{1} << 20;
inline constexpr int32_t kMaxTopK = 1 << 20;
inline constexpr size_t kMaxStopStrings = 16;
inline constexpr int64_t kMaxKvBudget = int64_t{1} << 24;

// 1 to kMaxNewTokens. `name` is the caller's spelling (chat's "max_completion_tokens").
void check_max_tokens(int64_t max_tokens, const char* name = "max_tokens");
// temperature in [0, 100] (0: greedy), top_k in [0, 2^20] (0: off), top_p in (0, 1],
// min_p in [0, 1), and the sampler's own ranges (SamplerParams::validate).
void check_sampling(const SamplerParams& sampling);
// A seed the caller gives (no seed is a random one): >= 0.
void check_seed(int64_t seed);
// Up to 16 non-empty strings (an empty one would match at once).
void check_stop(const std::vector<std::string>& stop);
// A chat message's role: system, user or assistant.
void check_role(const std::string& role);
// The budget a press gets: at most one of kv_budget (1 to 2^24 entries per KV head) and
// kv_ratio (in [0, 0.999]), and neither with the press "full".
void check_budget(const std::string& press, std::optional<int64_t> kv_budget, std::optional<double> kv_ratio);

}  // namespace deferkv
