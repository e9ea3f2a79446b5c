#include "eval/reports/turn_summary.h"

#include <algorithm>
#include <map>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "deferkv/error.h"

namespace deferkv::eval {

std::optional<TurnSummary> summarize_turns(const SweepPlan& plan, const std::vector<nlohmann::json>& records,
                                           const nlohmann::ordered_json& config) {
  const int64_t questions = config.value("questions_per_context", int64_t{1});
  if (questions <= 1) return std::nullopt;
  TurnSummary summary;
  summary.questions = questions;
  summary.mode = config.value("context_mode", std::string("independent"));
  const std::set<std::string> tasks(plan.tasks.begin(), plan.tasks.end());
  const std::set<int64_t> lengths(plan.lengths.begin(), plan.lengths.end());
  for (const SweepMethod& method : plan.methods) {
    const std::string identity = method.identity();
    std::vector<double> sums(static_cast<size_t>(questions), 0.0);
    TurnRow row;
    row.label = method.label();
    for (const nlohmann::json& r : records) {
      if (r.value("method_params", "") != identity || !r.contains("turn_scores") || !r.contains("task")) continue;
      if (!tasks.contains(r["task"].get<std::string>()) || !lengths.contains(r.value("length", int64_t{0})) ||
          r.value("index", int64_t{0}) >= plan.samples) {
        continue;
      }
      const nlohmann::json& scores = r["turn_scores"];
      if (!scores.is_array() || std::ssize(scores) != questions) {
        fail("a row of {} has {} turn scores, not {}", row.label, scores.size(), questions);
      }
      for (size_t k = 0; k < sums.size(); ++k) sums[k] += scores[k].get<double>();
      row.prefill_tokens_saved += r.value("prefill_tokens_saved", int64_t{0});
      ++row.samples;
    }
    for (double sum : sums) {
      row.scores.push_back(row.samples > 0 ? std::optional<double>(100 * sum / static_cast<double>(row.samples))
                                           : std::nullopt);
    }
    summary.rows.push_back(std::move(row));
  }
  return summary;
}

std::string turn_markdown(const TurnSummary& summary) {
  std::ostringstream md;
  md << fmt::format(
      "\n## Score by turn ({} questions per context, {})\n\nEach context compressed once; turn k's score is "
      "its question's alone, 0-100, over every sample. Prefill tokens saved: the context's tokens not prefilled "
      "again for turns 2..{}, summed over the samples.\n\n| method |",
      summary.questions, summary.mode, summary.questions);
  for (int64_t k = 1; k <= summary.questions; ++k) md << " turn " << k << " |";
  md << " samples | prefill tokens saved |\n| --- |";
  for (int64_t k = 0; k < summary.questions + 2; ++k) md << " ---: |";
  md << '\n';
  for (const TurnRow& row : summary.rows) {
    md << "| " << row.label << " |";
    for (const auto& score : row.scores) md << ' ' << (score ? fmt::format("{:.2f}", *score) : "—") << " |";
    md << ' ' << row.samples << " | " << row.prefill_tokens_saved << " |\n";
  }
  md << "\n![score by turn](score-by-turn.svg)\n";
  return md.str();
}

nlohmann::ordered_json turn_json(const TurnSummary& summary) {
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  for (const TurnRow& row : summary.rows) {
    nlohmann::ordered_json scores = nlohmann::ordered_json::array();
    for (const auto& s : row.scores) scores.push_back(s ? nlohmann::ordered_json(*s) : nlohmann::ordered_json(nullptr));
    rows.push_back({{"label", row.label},
                    {"turn_scores", scores},
                    {"samples", row.samples},
                    {"prefill_tokens_saved", row.prefill_tokens_saved}});
  }
  return {{"questions_per_context", summary.questions}, {"context_mode", summary.mode}, {"rows", rows}};
}

}  // namespace deferkv::eval
