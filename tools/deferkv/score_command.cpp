// `deferkv score`: scores a predictions JSONL file with the official LongBench, RULER or
// NIAH metric and prints the score of each dataset / task / cell and their average.
//   deferkv score pred.jsonl                      JSON, benchmark taken from the fields
//   deferkv score pred.jsonl --benchmark ruler -o md
#include <fmt/format.h>

#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "deferkv/error.h"
#include "deferkv/score_predictions.h"

namespace deferkv::cli {
namespace {

struct ScoreArgs {
  std::string file;
  std::string benchmark;
  std::string output = "json";
};

void print_json(const eval::PredictionScores& result) {
  nlohmann::ordered_json scores = nlohmann::ordered_json::object();
  nlohmann::ordered_json samples = nlohmann::ordered_json::object();
  for (const eval::GroupScore& g : result.groups) {
    scores[g.name] = g.score;
    samples[g.name] = g.samples;
  }
  const nlohmann::ordered_json out = {{"benchmark", eval::benchmark_name(result.benchmark)},
                                      {"scores", scores},
                                      {"samples", samples},
                                      {"average", result.average}};
  fmt::print("{}\n", out.dump(2));
}

// The papers' layout: one column per dataset, then the average.
void print_markdown(const eval::PredictionScores& result) {
  std::string header = "|", rule = "|", row = "|";
  for (const eval::GroupScore& g : result.groups) {
    header += fmt::format(" {} |", g.name);
    rule += " ---: |";
    row += fmt::format(" {:.2f} |", g.score);
  }
  fmt::print("{} Avg. |\n{} ---: |\n{} {:.2f} |\n", header, rule, row, result.average);
}

void run_score(const ScoreArgs& args) {
  if (args.output != "md" && args.output != "json") fail("-o must be md or json, got '{}'", args.output);
  std::optional<eval::Benchmark> benchmark;
  if (!args.benchmark.empty()) benchmark = eval::benchmark_from_name(args.benchmark);
  const eval::PredictionScores result = eval::score_predictions_file(args.file, benchmark);
  if (args.output == "json") {
    print_json(result);
  } else {
    print_markdown(result);
  }
}

}  // namespace

void add_score_command(CLI::App& app) {
  auto args = std::make_shared<ScoreArgs>();
  CLI::App* cmd = app.add_subcommand(
      "score", "Score a predictions JSONL file with the official LongBench, RULER or NIAH metric");
  cmd->add_option("file", args->file,
                  "One JSON object per line: LongBench {dataset, pred, answers, all_classes}, "
                  "RULER {task, pred, outputs}, NIAH {pred, needle[, length, depth]}")
      ->required();
  cmd->add_option("--benchmark", args->benchmark,
                  "longbench, ruler or niah (default: taken from the first line's fields)");
  cmd->add_option("-o,--output", args->output, "Output format: json or md")->capture_default_str();
  cmd->callback([args] { run_score(*args); });
}

}  // namespace deferkv::cli
