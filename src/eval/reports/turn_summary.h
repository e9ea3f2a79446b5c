#pragma once
// The shared-context report (eval --questions-per-context Q > 1; issue 44): per method, the
// score of turn k for k = 1..Q (each question's own score, averaged over every sample of the
// plan) and the prefill tokens the shared context saved (the context's tokens not prefilled
// again for turns 2..Q, summed over the samples).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "deferkv/eval_sweep.h"

namespace deferkv::eval {

struct TurnRow {
  std::string label;
  std::vector<std::optional<double>> scores;  // per turn, 0-100; unset: no sample yet
  int64_t samples = 0;
  int64_t prefill_tokens_saved = 0;
};

struct TurnSummary {
  int64_t questions = 0;  // Q
  std::string mode;       // turn_mode_name()
  std::vector<TurnRow> rows;
};

// From the folder's records of the plan's methods (matched by SweepMethod::identity) that
// carry turn_scores; nullopt when `config` asks one question a context.
std::optional<TurnSummary> summarize_turns(const SweepPlan& plan, const std::vector<nlohmann::json>& records,
                                           const nlohmann::ordered_json& config);
// "## Score by turn" with one column per turn and the prefill tokens saved.
std::string turn_markdown(const TurnSummary& summary);
nlohmann::ordered_json turn_json(const TurnSummary& summary);

}  // namespace deferkv::eval
