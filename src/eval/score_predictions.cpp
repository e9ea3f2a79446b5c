#include "deferkv/score_predictions.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>
#include <tuple>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "deferkv/error.h"
#include "deferkv/eval_metrics.h"

namespace deferkv::eval {
namespace {

using nlohmann::json;

const json& field(const json& line, std::string_view name) {
  const auto it = line.find(name);
  if (it == line.end()) fail("missing field '{}'", name);
  return *it;
}

std::string string_field(const json& line, std::string_view name) {
  const json& value = field(line, name);
  if (!value.is_string()) fail("field '{}' must be a string, not {}", name, value.type_name());
  return value.get<std::string>();
}

std::vector<std::string> string_list(const json& value, std::string_view name) {
  if (!value.is_array()) fail("field '{}' must be a list of strings, not {}", name, value.type_name());
  std::vector<std::string> out;
  for (const json& item : value) {
    if (!item.is_string()) fail("field '{}' must be a list of strings; it holds a {}", name, item.type_name());
    out.push_back(item.get<std::string>());
  }
  return out;
}

double number_field(const json& line, std::string_view name) {
  const json& value = field(line, name);
  if (!value.is_number()) fail("field '{}' must be a number, not {}", name, value.type_name());
  return value.get<double>();
}

Benchmark infer_benchmark(const json& line) {
  if (line.contains("dataset")) return Benchmark::kLongBench;
  if (line.contains("task")) return Benchmark::kRuler;
  if (line.contains("needle")) return Benchmark::kNiah;
  fail("cannot tell the benchmark: the line has none of the fields 'dataset' (LongBench), "
       "'task' (RULER) or 'needle' (NIAH); give --benchmark");
}

// Where a line's score goes and what it is.
struct ScoredLine {
  std::string group;
  double score;
};

ScoredLine score_longbench_line(const json& line) {
  const std::string dataset = string_field(line, "dataset");
  const std::vector<std::string> answers = string_list(field(line, "answers"), "answers");
  std::vector<std::string> classes;
  if (const auto it = line.find("all_classes"); it != line.end() && !it->is_null()) {
    classes = string_list(*it, "all_classes");
  }
  return {dataset, longbench_sample_score(dataset, string_field(line, "pred"), answers, classes)};
}

ScoredLine score_ruler_line(const json& line) {
  const std::string task = string_field(line, "task");
  const std::vector<std::string> outputs = string_list(field(line, "outputs"), "outputs");
  return {task, ruler_sample_score(task, string_field(line, "pred"), outputs)};
}

std::string niah_cell(const json& line) {
  const bool has_length = line.contains("length"), has_depth = line.contains("depth");
  if (!has_length && !has_depth) return "all";
  if (has_length != has_depth) fail("give both 'length' and 'depth', or neither");
  return fmt::format("length={},depth={}", number_field(line, "length"), number_field(line, "depth"));
}

ScoredLine score_niah_line(const json& line) {
  return {niah_cell(line), niah_score(string_field(line, "pred"), string_field(line, "needle"))};
}

ScoredLine score_line(Benchmark benchmark, const json& line) {
  switch (benchmark) {
    case Benchmark::kLongBench: return score_longbench_line(line);
    case Benchmark::kRuler: return score_ruler_line(line);
    case Benchmark::kNiah: return score_niah_line(line);
  }
  fail("unknown benchmark {}", static_cast<int>(benchmark));
}

// The fixed order of the groups: the official list for LongBench and RULER; NIAH cells
// by their numbers.
std::vector<std::string> ordered_groups(Benchmark benchmark,
                                        const std::map<std::string, std::vector<double>>& scores,
                                        const std::map<std::string, std::pair<double, double>>& cells) {
  std::vector<std::string> order;
  if (benchmark == Benchmark::kNiah && scores.contains("all")) return {"all"};
  if (benchmark == Benchmark::kNiah) {
    std::vector<std::tuple<double, double, std::string>> keyed;
    for (const auto& [name, key] : cells) keyed.emplace_back(key.first, key.second, name);
    std::sort(keyed.begin(), keyed.end());
    for (auto& entry : keyed) order.push_back(std::get<2>(entry));
    return order;
  }
  const auto known = benchmark == Benchmark::kLongBench ? longbench_datasets() : ruler_tasks();
  for (std::string_view name : known) {
    if (scores.contains(std::string(name))) order.emplace_back(name);
  }
  return order;
}

double group_score(Benchmark benchmark, const std::vector<double>& samples) {
  switch (benchmark) {
    case Benchmark::kLongBench: return longbench_dataset_score(samples);
    case Benchmark::kRuler: return ruler_task_score(samples);
    case Benchmark::kNiah: break;
  }
  double total = 0.0;
  for (double s : samples) total += s;
  return python_round(total / static_cast<double>(samples.size()), 2);
}

}  // namespace

std::string_view benchmark_name(Benchmark benchmark) {
  switch (benchmark) {
    case Benchmark::kLongBench: return "longbench";
    case Benchmark::kRuler: return "ruler";
    case Benchmark::kNiah: return "niah";
  }
  fail("unknown benchmark {}", static_cast<int>(benchmark));
}

Benchmark benchmark_from_name(std::string_view name) {
  for (Benchmark b : {Benchmark::kLongBench, Benchmark::kRuler, Benchmark::kNiah}) {
    if (benchmark_name(b) == name) return b;
  }
  fail("unknown benchmark '{}' (known: longbench, ruler, niah)", name);
}

PredictionScores score_predictions(std::string_view jsonl, std::string_view source,
                                   std::optional<Benchmark> benchmark) {
  std::map<std::string, std::vector<double>> scores;
  std::map<std::string, std::pair<double, double>> niah_cells;  // name → (length, depth)
  size_t line_number = 0;
  for (size_t start = 0; start < jsonl.size();) {
    size_t end = jsonl.find('\n', start);
    if (end == std::string_view::npos) end = jsonl.size();
    const std::string_view text = jsonl.substr(start, end - start);
    start = end + 1;
    ++line_number;
    if (text.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    try {
      json line;
      try {
        line = json::parse(text);
      } catch (const json::exception& e) {  // parse_error, or out_of_range for a number past double
        fail("invalid JSON ({})", e.what());
      }
      if (!line.is_object()) fail("expected a JSON object, got {}", line.type_name());
      if (!benchmark) benchmark = infer_benchmark(line);
      ScoredLine scored = score_line(*benchmark, line);
      if (*benchmark == Benchmark::kNiah && scored.group != "all") {
        niah_cells[scored.group] = {number_field(line, "length"), number_field(line, "depth")};
      }
      scores[scored.group].push_back(scored.score);
    } catch (const Error& e) {
      fail("{}:{}: {}", source, line_number, e.what());
    }
  }
  if (!benchmark || scores.empty()) fail("{}: no predictions in it", source);
  if (*benchmark == Benchmark::kNiah && scores.contains("all") && !niah_cells.empty()) {
    fail("{}: some NIAH lines give 'length' and 'depth' and some do not", source);
  }

  PredictionScores result{*benchmark, {}, 0.0};
  std::vector<double> group_scores;
  for (const std::string& name : ordered_groups(*benchmark, scores, niah_cells)) {
    const std::vector<double>& samples = scores.at(name);
    result.groups.push_back({name, samples.size(), group_score(*benchmark, samples)});
    group_scores.push_back(result.groups.back().score);
  }
  result.average = benchmark_average(group_scores);
  return result;
}

PredictionScores score_predictions_file(const std::string& path, std::optional<Benchmark> benchmark) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot read '{}'", path);
  std::ostringstream text;
  text << in.rdbuf();
  return score_predictions(text.str(), path, benchmark);
}

}  // namespace deferkv::eval
