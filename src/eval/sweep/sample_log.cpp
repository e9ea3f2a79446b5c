#include "eval/sweep/sample_log.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "deferkv/error.h"

namespace deferkv::eval {
namespace {

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  std::ostringstream text;
  text << in.rdbuf();
  return std::move(text).str();
}

// The complete lines of the log, each parsed; `complete_bytes` is where they end.
std::vector<nlohmann::json> parse_lines(const std::string& path, const std::string& text, size_t& complete_bytes) {
  std::vector<nlohmann::json> records;
  size_t begin = 0, line_number = 1;
  for (size_t end; (end = text.find('\n', begin)) != std::string::npos; begin = end + 1, ++line_number) {
    if (end == begin) continue;
    auto record = nlohmann::json::parse(text.substr(begin, end - begin), nullptr, false);
    if (record.is_discarded() || !record.is_object()) fail("{}:{}: not a JSON object", path, line_number);
    records.push_back(std::move(record));
  }
  complete_bytes = begin;
  return records;
}

}  // namespace

SampleLog::SampleLog(std::string path) : path_(std::move(path)) {
  const std::string text = read_all(path_);
  size_t complete = 0;
  for (const auto& record : parse_lines(path_, text, complete)) keys_.insert(key_of(record));
  if (complete < text.size()) std::filesystem::resize_file(path_, complete);  // an unfinished last line
  file_ = std::fopen(path_.c_str(), "ab");
  if (file_ == nullptr) fail("cannot append to '{}'", path_);
}

SampleLog::~SampleLog() { std::fclose(file_); }

void SampleLog::append(const std::string& key, const nlohmann::ordered_json& record) {
  const std::string line = record.dump() + "\n";
  if (std::fwrite(line.data(), 1, line.size(), file_) != line.size() || std::fflush(file_) != 0) {
    fail("cannot write to '{}'", path_);
  }
  keys_.insert(key);
}

std::vector<nlohmann::json> SampleLog::read(const std::string& path) {
  size_t complete = 0;
  return parse_lines(path, read_all(path), complete);
}

std::string SampleLog::ruler_key(const std::string& label, const std::string& task, int64_t length, int64_t index) {
  return fmt::format("{}|{}|{}|{}", label, task, length, index);
}

std::string SampleLog::niah_key(const std::string& label, int64_t length, double depth) {
  return fmt::format("{}|niah|{}|{}", label, length, depth);
}

std::string SampleLog::longbench_key(const std::string& label, const std::string& dataset, int64_t index) {
  return fmt::format("{}|longbench|{}|{}", label, dataset, index);
}

std::string SampleLog::key_of(const nlohmann::json& record) {
  try {
    const std::string label = record.at("label").get<std::string>();
    if (record.contains("dataset")) {
      return longbench_key(label, record.at("dataset").get<std::string>(), record.at("index").get<int64_t>());
    }
    const int64_t length = record.at("length").get<int64_t>();
    if (record.contains("task")) {
      return ruler_key(label, record.at("task").get<std::string>(), length, record.at("index").get<int64_t>());
    }
    return niah_key(label, length, record.at("depth").get<double>());
  } catch (const nlohmann::json::exception& e) {
    fail("a sample record lacks its label, dataset, task, length, index or depth: {}", e.what());
  }
}

}  // namespace deferkv::eval
