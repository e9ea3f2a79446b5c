// LongBench's files and rules: the JSONL reader, the two config JSONs, the chat-format
// exemptions, middle truncation and prompt filling (THUDM/LongBench LongBench/pred.py).
#include <algorithm>
#include <array>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "base/resource_dir.h"
#include "deferkv/error.h"
#include "deferkv/eval_longbench.h"

namespace deferkv::eval {
namespace {

using nlohmann::json;

constexpr std::array<std::string_view, 16> kEnglishDatasets = {
    "narrativeqa", "qasper",   "multifieldqa_en", "hotpotqa",      "2wikimqa",
    "musique",     "gov_report", "qmsum",         "multi_news",    "trec",
    "triviaqa",    "samsum",   "passage_count",   "passage_retrieval_en", "lcc",
    "repobench-p"};

std::vector<std::string> strings_of(const json& value, const std::string& where, const char* field) {
  if (value.is_null()) return {};
  if (!value.is_array()) fail("{}: '{}' is not a list", where, field);
  std::vector<std::string> out;
  for (const json& v : value) {
    if (!v.is_string()) fail("{}: '{}' holds a non-string", where, field);
    out.push_back(v.get<std::string>());
  }
  return out;
}

LongBenchRow row_of(const json& line, const std::string& where) {
  for (const char* field : {"input", "context", "answers", "length", "dataset", "language", "all_classes", "_id"}) {
    if (!line.contains(field)) fail("{}: no '{}' field (the official LongBench schema has it)", where, field);
  }
  // A float such as 1e300 read as int64 would be undefined behaviour: whole numbers only.
  if (!line["length"].is_number_integer()) fail("{}: 'length' is {}, not a whole number", where, line["length"].dump());
  try {
    return {line["input"].get<std::string>(),  line["context"].get<std::string>(),
            strings_of(line["answers"], where, "answers"), line["length"].get<int64_t>(),
            line["dataset"].get<std::string>(), line["language"].get<std::string>(),
            strings_of(line["all_classes"], where, "all_classes"), line["_id"].get<std::string>()};
  } catch (const json::exception& e) {
    fail("{}: a field has the wrong type ({})", where, e.what());
  }
}

json read_json_file(const std::string& path) {
  // A folder opens as a stream whose first read throws std::ios_base::failure; the
  // error_code overload, because a name too long for the system throws otherwise.
  std::error_code error;
  std::ifstream in(path, std::ios::binary);
  if (!std::filesystem::is_regular_file(path, error) || !in) fail("cannot open '{}'", path);
  json value = json::parse(in, nullptr, false);
  if (value.is_discarded() || !value.is_object()) fail("'{}' is not a JSON object", path);
  return value;
}

}  // namespace

std::vector<LongBenchRow> read_longbench_file(const std::string& path, int64_t limit) {
  std::error_code error;
  if (!std::filesystem::is_regular_file(path, error)) {
    fail("LongBench dataset file '{}' does not exist (the official <dataset>.jsonl of THUDM/LongBench)", path);
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot open '{}'", path);
  std::vector<LongBenchRow> rows;
  std::string text;
  for (int64_t number = 1; (limit < 0 || static_cast<int64_t>(rows.size()) < limit) && std::getline(in, text); ++number) {
    if (text.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = fmt::format("{}:{}", path, number);
    const json line = json::parse(text, nullptr, false);
    if (line.is_discarded() || !line.is_object()) fail("{}: not a JSON object", where);
    rows.push_back(row_of(line, where));
  }
  return rows;
}

std::span<const std::string_view> longbench_english_datasets() { return kEnglishDatasets; }

bool longbench_uses_chat(std::string_view dataset) {
  static constexpr std::array<std::string_view, 6> kPlain = {"trec", "triviaqa", "samsum", "lsht", "lcc", "repobench-p"};
  return std::find(kPlain.begin(), kPlain.end(), dataset) == kPlain.end();
}

std::vector<int32_t> middle_truncate(std::span<const int32_t> tokens, int64_t max_length) {
  if (static_cast<int64_t>(tokens.size()) <= max_length) return {tokens.begin(), tokens.end()};
  const auto half = static_cast<size_t>(max_length / 2);
  std::vector<int32_t> kept(tokens.begin(), tokens.begin() + static_cast<std::ptrdiff_t>(half));
  kept.insert(kept.end(), tokens.end() - static_cast<std::ptrdiff_t>(half), tokens.end());
  return kept;
}

std::string fill_longbench_prompt(std::string_view prompt_template, const LongBenchRow& row) {
  std::string out;
  for (size_t i = 0; i < prompt_template.size(); ++i) {
    const char c = prompt_template[i];
    if ((c == '{' || c == '}') && i + 1 < prompt_template.size() && prompt_template[i + 1] == c) {
      out += c;
      ++i;
      continue;
    }
    if (c != '{') {
      out += c;
      continue;
    }
    const size_t close = prompt_template.find('}', i);
    if (close == std::string_view::npos) fail("prompt template: '{{' without '}}'");
    const std::string_view field = prompt_template.substr(i + 1, close - i - 1);
    if (field == "context") {
      out += row.context;
    } else if (field == "input") {
      out += row.input;
    } else {
      fail("prompt template: unknown field '{{{}}}' (LongBench fills context and input)", field);
    }
    i = close;
  }
  return out;
}

LongBenchConfig LongBenchConfig::load(const std::string& dir) {
  LongBenchConfig config;
  config.dir_ = dir;
  // Named, so the objects outlive the loops over their items.
  const json prompts = read_json_file(dir + "/dataset2prompt.json");
  const json max_new_tokens = read_json_file(dir + "/dataset2maxlen.json");
  for (const auto& [name, value] : prompts.items()) {
    if (!value.is_string()) fail("'{}/dataset2prompt.json': '{}' is not a string", dir, name);
    config.prompts_.emplace(name, value.get<std::string>());
  }
  for (const auto& [name, value] : max_new_tokens.items()) {
    if (!value.is_number_integer() || value.get<int64_t>() < 1) {
      fail("'{}/dataset2maxlen.json': '{}' is not a positive whole number", dir, name);
    }
    config.max_new_tokens_.emplace(name, value.get<int64_t>());
  }
  return config;
}

std::string LongBenchConfig::default_dir() { return resource_dir() + "/data/longbench"; }

const std::string& LongBenchConfig::prompt_template(std::string_view dataset) const {
  const auto it = prompts_.find(dataset);
  if (it == prompts_.end()) fail("dataset '{}' has no prompt in '{}/dataset2prompt.json'", dataset, dir_);
  return it->second;
}

int64_t LongBenchConfig::max_new_tokens(std::string_view dataset) const {
  const auto it = max_new_tokens_.find(dataset);
  if (it == max_new_tokens_.end()) fail("dataset '{}' has no entry in '{}/dataset2maxlen.json'", dataset, dir_);
  return it->second;
}

}  // namespace deferkv::eval
