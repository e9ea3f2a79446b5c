#include "eval/sweep/sample_log.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include <fmt/format.h>

#include "deferkv/error.h"
#include "tensor/json_numbers.h"

namespace deferkv::eval {
namespace {

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  std::ostringstream text;
  text << in.rdbuf();
  return std::move(text).str();
}

// What is wrong with a record, if anything: the fields key_of, summarize and the cost
// table read, by the record's shape (LongBench rows have "dataset", RULER's "task", NIAH's
// neither). A file is ours, but it may have been edited or come from elsewhere.
std::optional<std::string> record_problem(const nlohmann::json& r, RecordKind kind) {
  const auto missing = [&](const char* field, const char* what) -> std::optional<std::string> {
    if (!r.contains(field)) return fmt::format("it has no \"{}\" ({})", field, what);
    return fmt::format("its \"{}\" is {}, not {}", field, r[field].dump(), what);
  };
  const auto string = [&](const char* f) { return r.contains(f) && r[f].is_string(); };
  const auto count = [&](const char* f) {
    if (!r.contains(f)) return false;
    const std::optional<int64_t> v = json_whole_number(r[f]);
    return v && *v >= 0;
  };
  const auto finite = [&](const char* f) { return r.contains(f) && json_finite_number(r[f]).has_value(); };

  if (!string("method_params")) return missing("method_params", "a string");
  if (r.contains("dataset")) {
    if (!string("dataset")) return missing("dataset", "a string");
    if (!count("index")) return missing("index", "a whole number >= 0");
  } else {
    if (!count("length")) return missing("length", "a whole number >= 0");
    if (r.contains("task")) {
      if (!string("task")) return missing("task", "a string");
      if (!count("index")) return missing("index", "a whole number >= 0");
    } else if (!finite("depth")) {
      return missing("depth", "a number");
    }
  }
  if (kind == RecordKind::kFailure) {
    if (!string("error")) return missing("error", "a string");
    return std::nullopt;
  }
  for (const char* f : {"score", "prompt_tokens", "prefill_seconds", "decode_tokens_per_second", "capture_seconds",
                        "eviction_seconds"}) {
    if (!finite(f)) return missing(f, "a number");
  }
  if (!count("peak_kv_bytes")) return missing("peak_kv_bytes", "a whole number >= 0");
  if (r.contains("peak_rss_bytes") && !count("peak_rss_bytes")) return missing("peak_rss_bytes", "a whole number >= 0");
  if (r.contains("candidate_pool") && !count("candidate_pool")) return missing("candidate_pool", "a whole number >= 0");
  if (!r.contains("kv_bytes_after_eviction") || (!r["kv_bytes_after_eviction"].is_null() && !finite("kv_bytes_after_eviction"))) {
    return missing("kv_bytes_after_eviction", "a number or null");
  }
  return std::nullopt;
}

// The complete lines of the log, each parsed and checked; `complete_bytes` is where they end.
std::vector<nlohmann::json> parse_lines(const std::string& path, const std::string& text, RecordKind kind,
                                        size_t& complete_bytes) {
  std::vector<nlohmann::json> records;
  size_t begin = 0, line_number = 1;
  for (size_t end; (end = text.find('\n', begin)) != std::string::npos; begin = end + 1, ++line_number) {
    if (end == begin) continue;
    auto record = nlohmann::json::parse(text.substr(begin, end - begin), nullptr, false);
    if (record.is_discarded() || !record.is_object()) fail("{}:{}: not a JSON object", path, line_number);
    if (const auto problem = record_problem(record, kind)) {
      fail("{}:{}: not a {} record: {}", path, line_number, kind == RecordKind::kSample ? "sample" : "failed row's",
           *problem);
    }
    records.push_back(std::move(record));
  }
  complete_bytes = begin;
  return records;
}

std::string host_name() {
  char name[256] = {};
  return ::gethostname(name, sizeof(name) - 1) == 0 ? std::string(name) : std::string("?");
}

}  // namespace

SampleLog::SampleLog(std::string path, RecordKind kind) : path_(std::move(path)), owner_path_(path_ + ".owner") {
  const int fd = ::open(path_.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) fail("cannot append to '{}': {}", path_, std::strerror(errno));
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    ::close(fd);
    std::string owner = read_all(owner_path_);
    while (!owner.empty() && owner.back() == '\n') owner.pop_back();
    fail("'{}' is in use: another process ({}) is appending to {}; wait for it to finish, or run this sweep as "
         "another shard (--shard) or into another folder",
         std::filesystem::path(path_).parent_path().string(), owner.empty() ? "unknown" : owner,
         std::filesystem::path(path_).filename().string());
  }
  // Said in the error a second process gets; the lock, not this file, is what excludes it.
  std::ofstream(owner_path_, std::ios::trunc) << fmt::format("pid {} on {}\n", ::getpid(), host_name());
  size_t complete = 0;
  const std::string text = read_all(path_);
  parse_lines(path_, text, kind, complete);
  if (complete < text.size()) std::filesystem::resize_file(path_, complete);  // an unfinished last line
  file_ = ::fdopen(fd, "ab");
  if (file_ == nullptr) {
    ::close(fd);
    fail("cannot append to '{}'", path_);
  }
}

SampleLog::~SampleLog() {
  std::error_code ignored;
  std::filesystem::remove(owner_path_, ignored);
  std::fclose(file_);  // releases the lock
}

void SampleLog::append(const nlohmann::ordered_json& record) {
  const std::string line = record.dump() + "\n";
  if (std::fwrite(line.data(), 1, line.size(), file_) != line.size() || std::fflush(file_) != 0) {
    fail("cannot write to '{}'", path_);
  }
}

std::vector<nlohmann::json> SampleLog::read(const std::string& path, RecordKind kind) {
  size_t complete = 0;
  return parse_lines(path, read_all(path), kind, complete);
}

std::vector<std::string> SampleLog::files_in(const std::string& dir, const std::string& stem) {
  std::vector<std::string> files;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(dir, error)) {
    const std::string name = entry.path().filename().string();
    const bool shard = name.rfind(stem + ".shard-", 0) == 0 && name.ends_with(".jsonl");
    if (name == stem + ".jsonl" || shard) files.push_back(entry.path().string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

std::string SampleLog::ruler_key(const std::string& method, const std::string& task, int64_t length, int64_t index) {
  return fmt::format("{}|{}|{}|{}", method, task, length, index);
}

std::string SampleLog::niah_key(const std::string& method, int64_t length, double depth) {
  return fmt::format("{}|niah|{}|{}", method, length, depth);
}

std::string SampleLog::longbench_key(const std::string& method, const std::string& dataset, int64_t index) {
  return fmt::format("{}|longbench|{}|{}", method, dataset, index);
}

std::string SampleLog::key_of(const nlohmann::json& record) {
  try {
    const std::string method = record.at("method_params").get<std::string>();
    if (record.contains("dataset")) {
      return longbench_key(method, record.at("dataset").get<std::string>(), record.at("index").get<int64_t>());
    }
    const int64_t length = record.at("length").get<int64_t>();
    if (record.contains("task")) {
      return ruler_key(method, record.at("task").get<std::string>(), length, record.at("index").get<int64_t>());
    }
    return niah_key(method, length, record.at("depth").get<double>());
  } catch (const nlohmann::json::exception& e) {
    fail("a sample record lacks its method_params, dataset, task, length, index or depth: {}", e.what());
  }
}

}  // namespace deferkv::eval
