#pragma once
// samples.jsonl: one JSON object a line, one line a sample, appended and flushed as each
// sample is done. Opening it reads what is there so a rerun skips it; a last line cut
// short by a crash is dropped from the file.
#include <cstdint>
#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace deferkv::eval {

class SampleLog {
 public:
  explicit SampleLog(std::string path);
  ~SampleLog();
  SampleLog(const SampleLog&) = delete;
  SampleLog& operator=(const SampleLog&) = delete;

  bool contains(const std::string& key) const { return keys_.contains(key); }
  void append(const std::string& key, const nlohmann::ordered_json& record);
  size_t size() const { return keys_.size(); }

  // Every record in the file at `path` (none when it does not exist).
  static std::vector<nlohmann::json> read(const std::string& path);
  // A sample's key: method label, task, length and sample number (RULER) or depth (NIAH).
  static std::string ruler_key(const std::string& label, const std::string& task, int64_t length, int64_t index);
  static std::string niah_key(const std::string& label, int64_t length, double depth);
  static std::string longbench_key(const std::string& label, const std::string& dataset, int64_t index);
  // The key of a record: LongBench records have "dataset" and "index", RULER ones "task"
  // and "index", NIAH ones "depth".
  static std::string key_of(const nlohmann::json& record);

 private:
  std::string path_;
  std::set<std::string> keys_;
  std::FILE* file_ = nullptr;
};

}  // namespace deferkv::eval
