#include "deferkv/score_predictions.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <span>
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

bool is_known(std::span<const std::string_view> names, std::string_view name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

// From the line's fields, else from the name of its file's default group.
Benchmark infer_benchmark(const json& line, const std::string& default_group) {
  if (line.contains("dataset")) return Benchmark::kLongBench;
  if (line.contains("task")) return Benchmark::kRuler;
  if (line.contains("needle")) return Benchmark::kNiah;
  if (is_known(longbench_datasets(), default_group)) return Benchmark::kLongBench;
  if (is_known(ruler_tasks(), default_group)) return Benchmark::kRuler;
  fail("cannot tell the benchmark: the line has none of the fields 'dataset' (LongBench), "
       "'task' (RULER) or 'needle' (NIAH){}; give --benchmark",
       default_group.empty() ? "" : fmt::format(" and '{}' is no LongBench dataset or RULER task", default_group));
}

// The line's dataset or task: its field, else the file's default group.
std::string group_field(const json& line, std::string_view name, const std::string& default_group) {
  if (!line.contains(name) && !default_group.empty()) return default_group;
  return string_field(line, name);
}

// Where a line's score goes and what it is.
struct ScoredLine {
  std::string group;
  double score;
};

ScoredLine score_longbench_line(const json& line, const std::string& default_group) {
  const std::string dataset = group_field(line, "dataset", default_group);
  const std::vector<std::string> answers = string_list(field(line, "answers"), "answers");
  std::vector<std::string> classes;
  if (const auto it = line.find("all_classes"); it != line.end() && !it->is_null()) {
    classes = string_list(*it, "all_classes");
  }
  return {dataset, longbench_sample_score(dataset, string_field(line, "pred"), answers, classes)};
}

ScoredLine score_ruler_line(const json& line, const std::string& default_group) {
  const std::string task = group_field(line, "task", default_group);
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

ScoredLine score_line(Benchmark benchmark, const json& line, const std::string& default_group) {
  switch (benchmark) {
    case Benchmark::kLongBench: return score_longbench_line(line, default_group);
    case Benchmark::kRuler: return score_ruler_line(line, default_group);
    case Benchmark::kNiah: return score_niah_line(line);
  }
  fail("unknown benchmark {}", static_cast<int>(benchmark));
}

// The row a line belongs to: its method label (a sweep's samples.jsonl), and for a RULER
// sweep line its target length too, as eval's summary has one table per length.
struct RowKey {
  std::string label;
  std::optional<int64_t> length;
  auto operator<=>(const RowKey&) const = default;
};

RowKey row_of(Benchmark benchmark, const json& line) {
  const auto it = line.find("label");
  if (it == line.end()) return {};
  if (!it->is_string()) fail("field 'label' must be a string, not {}", it->type_name());
  RowKey key{it->get<std::string>(), std::nullopt};
  if (benchmark == Benchmark::kRuler && line.contains("length")) {
    key.length = static_cast<int64_t>(number_field(line, "length"));
  }
  return key;
}

// A row's samples: scores per group, and the NIAH cells' (length, depth).
struct RowSamples {
  std::map<std::string, std::vector<double>> scores;
  std::map<std::string, std::pair<double, double>> niah_cells;
};

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
  for (double s : samples) total += niah_percent(s);
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

PredictionScores score_predictions(const std::vector<PredictionSource>& sources,
                                   std::optional<Benchmark> benchmark) {
  const bool benchmark_given = benchmark.has_value();
  std::map<RowKey, RowSamples> rows;
  std::vector<std::string> label_order;  // labels as they first appear
  for (const PredictionSource& source : sources) {
    const std::string_view jsonl = source.text;
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
        if (!benchmark_given) {
          const Benchmark inferred = infer_benchmark(line, source.default_group);
          if (benchmark && *benchmark != inferred) {
            fail("a {} line among {} ones; score one benchmark at a time", benchmark_name(inferred),
                 benchmark_name(*benchmark));
          }
          benchmark = inferred;
        }
        const ScoredLine scored = score_line(*benchmark, line, source.default_group);
        const RowKey key = row_of(*benchmark, line);
        if (std::find(label_order.begin(), label_order.end(), key.label) == label_order.end()) {
          label_order.push_back(key.label);
        }
        RowSamples& row = rows[key];
        if (*benchmark == Benchmark::kNiah && scored.group != "all") {
          row.niah_cells[scored.group] = {number_field(line, "length"), number_field(line, "depth")};
        }
        row.scores[scored.group].push_back(scored.score);
      } catch (const Error& e) {
        fail("{}:{}: {}", source.name, line_number, e.what());
      }
    }
  }
  const std::string names = sources.size() == 1 ? sources[0].name : "the predictions";
  if (!benchmark || rows.empty()) fail("{}: no predictions in it", names);

  PredictionScores result{*benchmark, {}};
  for (const std::string& label : label_order) {
    for (const auto& [key, row] : rows) {  // a label's lengths ascending
      if (key.label != label) continue;
      if (*benchmark == Benchmark::kNiah && row.scores.contains("all") && !row.niah_cells.empty()) {
        fail("{}: some NIAH lines give 'length' and 'depth' and some do not", names);
      }
      MethodScores method{key.label, key.length, {}, 0.0};
      std::vector<double> group_scores;
      for (const std::string& name : ordered_groups(*benchmark, row.scores, row.niah_cells)) {
        const std::vector<double>& samples = row.scores.at(name);
        method.groups.push_back({name, samples.size(), group_score(*benchmark, samples)});
        group_scores.push_back(method.groups.back().score);
      }
      method.average = benchmark_average(group_scores);
      result.rows.push_back(std::move(method));
    }
  }
  return result;
}

PredictionScores score_predictions(std::string_view jsonl, std::string_view source,
                                   std::optional<Benchmark> benchmark) {
  return score_predictions({PredictionSource{std::string(jsonl), std::string(source), ""}}, benchmark);
}

namespace {

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot read '{}'", path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

PredictionScores score_predictions_path(const std::string& path, std::optional<Benchmark> benchmark,
                                        const std::string& task) {
  namespace fs = std::filesystem;
  std::error_code error;
  if (!fs::is_directory(path, error)) {
    // A single file's name is its default group only when it names a dataset or task
    // (RULER's pred/niah_single_1.jsonl), never for eval's samples.jsonl.
    std::string group = task;
    const std::string stem = fs::path(path).stem().string();
    if (group.empty() && (is_known(longbench_datasets(), stem) || is_known(ruler_tasks(), stem))) group = stem;
    return score_predictions({PredictionSource{read_text(path), path, group}}, benchmark);
  }
  std::vector<fs::path> files;
  for (const fs::directory_entry& entry : fs::directory_iterator(path, error)) {
    if (entry.is_regular_file() && entry.path().extension() == ".jsonl") files.push_back(entry.path());
  }
  if (error) fail("cannot list '{}': {}", path, error.message());
  if (files.empty()) fail("'{}' holds no predictions (*.jsonl files)", path);
  std::sort(files.begin(), files.end());
  std::vector<PredictionSource> sources;
  for (const fs::path& file : files) {
    sources.push_back({read_text(file.string()), file.string(), task.empty() ? file.stem().string() : task});
  }
  return score_predictions(sources, benchmark);
}

}  // namespace deferkv::eval
