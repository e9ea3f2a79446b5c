#include "eval/reports/leaderboard.h"

#include <sstream>

#include <fmt/format.h>

#include "deferkv/generate.h"

namespace deferkv::eval {
namespace {

using nlohmann::ordered_json;

std::string score_text(const std::optional<double>& score) { return score ? fmt::format("{:.2f}", *score) : "—"; }

std::string mode_text(bool question_agnostic) { return question_mode_name(question_agnostic); }

ordered_json optional_number(const std::optional<double>& v) { return v ? ordered_json(*v) : ordered_json(nullptr); }

std::string csv_field(const std::string& text) {
  if (text.find_first_of(",\"\n") == std::string::npos) return text;
  std::string quoted = "\"";
  for (char c : text) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
  return quoted + "\"";
}

}  // namespace

std::string leaderboard_markdown(const Leaderboard& board) {
  std::ostringstream md;
  md << "# " << board.title << "\n\n";
  for (const std::string& note : board.notes) md << "- " << note << '\n';
  md << "\n| press | question | ";
  for (double r : board.ratios) md << fmt::format("{:g} | ", r);
  md << "Avg. |\n| --- | --- |";
  for (size_t i = 0; i <= board.ratios.size(); ++i) md << " ---: |";
  md << '\n';
  // The ceiling on every ratio's column: what the same samples score with nothing evicted.
  md << "| full cache (ceiling) | — |";
  for (size_t i = 0; i <= board.ratios.size(); ++i) md << ' ' << score_text(board.full) << " |";
  md << '\n';
  for (const LeaderboardLine& line : board.lines) {
    md << "| " << line.press << " | " << mode_text(line.question_agnostic) << " |";
    for (size_t i = 0; i < line.scores.size(); ++i) {
      md << ' ' << (!line.scores[i] && line.failed[i] > 0 ? "failed" : score_text(line.scores[i])) << " |";
    }
    md << ' ' << score_text(line.average) << " |\n";
  }
  for (const LeaderboardLine& line : board.lines) {
    int64_t failed = 0;
    for (int64_t n : line.failed) failed += n;
    if (failed > 0) {
      md << fmt::format("\n{} ({}): {} failed row(s): {}\n", line.press, mode_text(line.question_agnostic), failed,
                        line.error);
    }
  }
  md << "\n![score against compression ratio](leaderboard.svg)\n";
  return md.str();
}

std::string leaderboard_csv(const Leaderboard& board) {
  std::ostringstream out;
  out << "press,question_agnostic,compression_ratio,score,failed,error\n";
  out << "full,,0," << (board.full ? fmt::format("{:.2f}", *board.full) : "") << ",0,\n";
  for (const LeaderboardLine& line : board.lines) {
    for (size_t i = 0; i < board.ratios.size(); ++i) {
      out << csv_field(line.press) << ',' << (line.question_agnostic ? "true" : "false") << ','
          << fmt::format("{:g}", board.ratios[i]) << ','
          << (line.scores[i] ? fmt::format("{:.2f}", *line.scores[i]) : "") << ',' << line.failed[i] << ','
          << (line.failed[i] > 0 ? csv_field(line.error) : "") << '\n';
    }
  }
  return out.str();
}

ordered_json leaderboard_json(const Leaderboard& board) {
  ordered_json lines = ordered_json::array();
  for (const LeaderboardLine& line : board.lines) {
    ordered_json scores = ordered_json::object(), failed = ordered_json::object();
    for (size_t i = 0; i < board.ratios.size(); ++i) {
      const std::string key = fmt::format("{:g}", board.ratios[i]);
      scores[key] = optional_number(line.scores[i]);
      failed[key] = line.failed[i];
    }
    lines.push_back({{"press", line.press},
                     {"question_agnostic", line.question_agnostic},
                     {"scores", scores},
                     {"average", optional_number(line.average)},
                     {"failed", failed},
                     {"error", line.error.empty() ? ordered_json(nullptr) : ordered_json(line.error)}});
  }
  return {{"title", board.title},
          {"ratios", board.ratios},
          {"full", optional_number(board.full)},
          {"lines", lines}};
}

}  // namespace deferkv::eval
