#pragma once
// A protocol's leaderboard (deferkv eval --protocol kvpress): one line per press and question
// mode, its score at each compression ratio and their mean, the full cache as the ceiling;
// written as Markdown, tidy CSV and JSON beside its plot (plots/leaderboard_plot.h).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace deferkv::eval {

struct LeaderboardLine {
  std::string press;  // the spec as given ("snapkv", "deferkv:d=4")
  bool question_agnostic = true;
  std::vector<std::optional<double>> scores;  // one per ratio; unset: not run yet or failed
  std::vector<int64_t> failed;                // failed rows per ratio
  std::string error;                          // the first failed row's error
  std::optional<double> average;              // over the ratios that have a score
};

struct Leaderboard {
  std::string title;                // "RULER at 4096 tokens"
  std::vector<std::string> notes;   // Markdown list items under the title
  std::vector<double> ratios;
  std::optional<double> full;       // the full cache's score: the ceiling
  std::vector<LeaderboardLine> lines;
};

std::string leaderboard_markdown(const Leaderboard& board);
// One line per press, question mode and ratio (the full cache at ratio 0).
std::string leaderboard_csv(const Leaderboard& board);
nlohmann::ordered_json leaderboard_json(const Leaderboard& board);

}  // namespace deferkv::eval
