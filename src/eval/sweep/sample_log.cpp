#include "eval/sweep/sample_log.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
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

std::string host_name() {
  char name[256] = {};
  return ::gethostname(name, sizeof(name) - 1) == 0 ? std::string(name) : std::string("?");
}

}  // namespace

SampleLog::SampleLog(std::string path) : path_(std::move(path)), owner_path_(path_ + ".owner") {
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
  parse_lines(path_, text, complete);
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

std::vector<nlohmann::json> SampleLog::read(const std::string& path) {
  size_t complete = 0;
  return parse_lines(path, read_all(path), complete);
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
