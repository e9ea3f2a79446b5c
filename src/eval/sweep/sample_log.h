#pragma once
// A results folder's samples files: one JSON object a line, one line a row, appended and
// flushed as each row is done. A process appends to one file only (samples.jsonl, or its
// shard's samples.shard-<i>-of-<N>.jsonl), under an exclusive flock, so two processes never
// interleave lines in one file, also on a shared filesystem; every process reads all of the
// folder's files, so a row done anywhere is never run again. A last line cut short by a
// crash is dropped: by readers, and from the file by the next process that appends to it.
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace deferkv::eval {

// What a results file holds: samples.jsonl's rows (scores and costs) or failures.jsonl's.
enum class RecordKind { kSample, kFailure };

class SampleLog {
 public:
  // Opens `path`, a file of `kind` records, for appending; another process appending to it
  // is an error naming the file and that process.
  explicit SampleLog(std::string path, RecordKind kind = RecordKind::kSample);
  ~SampleLog();
  SampleLog(const SampleLog&) = delete;
  SampleLog& operator=(const SampleLog&) = delete;

  void append(const nlohmann::ordered_json& record);

  // Every complete record in the file at `path` (none when it does not exist). A record
  // without the fields its kind needs, of their types (row ids and byte counts whole
  // numbers, scores and costs finite), is an error naming the file, line and field: the
  // readers after this one take them as given.
  static std::vector<nlohmann::json> read(const std::string& path, RecordKind kind = RecordKind::kSample);
  // The samples files of the folder `dir`, sorted: samples.jsonl and samples.shard-*.jsonl
  // (with stem "failures": the failed rows' files, failures.jsonl and failures.shard-*.jsonl).
  static std::vector<std::string> files_in(const std::string& dir, const std::string& stem = "samples");
  // A row's key: the method's identity (SweepMethod::identity), then task, length and sample
  // number (RULER), length and depth (NIAH), or dataset and row (LongBench).
  static std::string ruler_key(const std::string& method, const std::string& task, int64_t length, int64_t index);
  static std::string niah_key(const std::string& method, int64_t length, double depth);
  static std::string longbench_key(const std::string& method, const std::string& dataset, int64_t index);
  // The key of a record: LongBench records have "dataset" and "index", RULER ones "task"
  // and "index", NIAH ones "depth".
  static std::string key_of(const nlohmann::json& record);

 private:
  std::string path_, owner_path_;
  std::FILE* file_ = nullptr;
};

}  // namespace deferkv::eval
