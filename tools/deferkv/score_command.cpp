// `deferkv score`: scores predictions with the official LongBench, RULER or NIAH metric
// and prints the score of each dataset / task / cell and their average, one row per method
// when the lines name their method (eval's samples.jsonl).
//   deferkv score results/<run>/samples.jsonl     JSON, benchmark taken from the fields
//   deferkv score pred/ --format md               RULER's pred/<task>.jsonl files
//   deferkv score pred.jsonl --benchmark ruler --task vt -o scores.json
#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "common_options.h"
#include "deferkv/error.h"
#include "deferkv/score_predictions.h"

namespace deferkv::cli {
namespace {

struct ScoreArgs {
  std::string path;
  std::string benchmark;
  std::string task;
  ReportOutput output;
};

const std::vector<std::string> kFormats = {"json", "md"};

std::string to_json(const eval::PredictionScores& result) {
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  for (const eval::MethodScores& row : result.rows) {
    nlohmann::ordered_json scores = nlohmann::ordered_json::object();
    nlohmann::ordered_json samples = nlohmann::ordered_json::object();
    for (const eval::GroupScore& g : row.groups) {
      scores[g.name] = g.score;
      samples[g.name] = g.samples;
    }
    rows.push_back({{"label", row.label.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(row.label)},
                    {"length", row.length ? nlohmann::ordered_json(*row.length) : nlohmann::ordered_json(nullptr)},
                    {"scores", scores},
                    {"samples", samples},
                    {"average", row.average}});
  }
  const nlohmann::ordered_json out = {{"benchmark", eval::benchmark_name(result.benchmark)}, {"rows", rows}};
  return out.dump(2) + "\n";
}

// The papers' layout: one row per method (a method column when the lines name one, a
// length column for a RULER sweep), one column per dataset, then the average.
std::string to_markdown(const eval::PredictionScores& result) {
  std::vector<std::string> columns;  // every group of any row, in the rows' order
  for (const eval::MethodScores& row : result.rows) {
    for (const eval::GroupScore& g : row.groups) {
      if (std::find(columns.begin(), columns.end(), g.name) == columns.end()) columns.push_back(g.name);
    }
  }
  const bool labelled = std::any_of(result.rows.begin(), result.rows.end(), [](const auto& r) { return !r.label.empty(); });
  const bool by_length = std::any_of(result.rows.begin(), result.rows.end(), [](const auto& r) { return r.length.has_value(); });
  std::string header = "|", rule = "|";
  if (labelled) header += " method |", rule += " --- |";
  if (by_length) header += " length |", rule += " ---: |";
  for (const std::string& c : columns) header += fmt::format(" {} |", c), rule += " ---: |";
  std::string out = fmt::format("{} Avg. |\n{} ---: |\n", header, rule);
  for (const eval::MethodScores& row : result.rows) {
    std::string line = "|";
    if (labelled) line += fmt::format(" {} |", row.label);
    if (by_length) line += row.length ? fmt::format(" {} |", *row.length) : std::string(" |");
    for (const std::string& c : columns) {
      const auto g = std::find_if(row.groups.begin(), row.groups.end(), [&](const auto& x) { return x.name == c; });
      line += g == row.groups.end() ? std::string(" |") : fmt::format(" {:.2f} |", g->score);
    }
    out += fmt::format("{} {:.2f} |\n", line, row.average);
  }
  return out;
}

void run_score(const ScoreArgs& args) {
  validate_report_output(args.output, kFormats);
  std::optional<eval::Benchmark> benchmark;
  if (!args.benchmark.empty()) benchmark = eval::benchmark_from_name(args.benchmark);
  const eval::PredictionScores result = eval::score_predictions_path(args.path, benchmark, args.task);
  write_report(args.output, args.output.format == "json" ? to_json(result) : to_markdown(result));
}

}  // namespace

void add_score_command(CLI::App& app) {
  auto args = std::make_shared<ScoreArgs>();
  CLI::App* cmd = app.add_subcommand(
      "score", "Score a predictions JSONL file with the official LongBench, RULER or NIAH metric");
  cmd->add_option("path", args->path,
                  "A predictions file, or a folder of them (RULER's pred/<task>.jsonl, LongBench's "
                  "pred/<model>/<dataset>.jsonl: the file name gives the task). One JSON object per "
                  "line: LongBench {dataset, pred, answers, all_classes}, RULER {task, pred, outputs}, "
                  "NIAH {pred, needle[, length, depth]}; lines with a 'label' (eval's samples.jsonl) "
                  "are scored per method")
      ->required();
  cmd->add_option("--benchmark,--bench", args->benchmark,
                  "longbench, ruler or niah (default: taken from the first line's fields or file name)");
  cmd->add_option("--task", args->task,
                  "The dataset or task of lines that do not name one (default: the file name)");
  add_report_output_options(*cmd, args->output, kFormats);
  cmd->callback([args] { run_score(*args); });
}

}  // namespace deferkv::cli
