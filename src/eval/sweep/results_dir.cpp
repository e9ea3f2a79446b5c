// The results folder of a row context: named from it (or by the user), never given to
// another context; `latest` beside it points at the last run's folder.
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "base/sha256.h"
#include "deferkv/error.h"
#include "deferkv/eval_sweep.h"

namespace deferkv::eval {
namespace {

using nlohmann::ordered_json;

// A name beside `path` that no other process or thread uses at the same time.
std::filesystem::path temporary_beside(const std::filesystem::path& path) {
  static std::atomic<uint64_t> count{0};
  return fmt::format("{}.tmp.{}.{}", path.string(), ::getpid(), count++);
}

// Written beside `path` and renamed over it, so a reader (or a shard starting at the same
// time) sees the old file or the new one, never half of one.
void write_atomically(const std::filesystem::path& path, const std::string& text) {
  const std::filesystem::path temporary = temporary_beside(path);
  {
    std::ofstream out(temporary, std::ios::binary);
    out << text;
    if (!out) fail("cannot write '{}'", temporary.string());
  }
  std::filesystem::rename(temporary, path);
}

void link_latest(const std::filesystem::path& parent, const std::filesystem::path& dir) {
  const std::filesystem::path link = parent / "latest";
  if (std::filesystem::exists(link) && !std::filesystem::is_symlink(link)) return;  // the user's own "latest"
  const std::filesystem::path temporary = temporary_beside(link);
  std::filesystem::create_directory_symlink(dir.filename(), temporary);
  std::filesystem::rename(temporary, link);
}

// Makes `dir` with its config.json in one step: a folder made beside it, config written,
// is renamed into place, so a shard starting at the same time finds no folder or one with
// its config.json, never an empty one. False when another process made `dir` first.
bool create_with_config(const std::filesystem::path& dir, const std::string& text) {
  const std::filesystem::path temporary = temporary_beside(dir);
  std::filesystem::create_directories(temporary);
  write_atomically(temporary / "config.json", text);
  std::error_code error;
  std::filesystem::rename(temporary, dir, error);
  if (!error) return true;
  std::filesystem::remove_all(temporary);
  return false;
}

std::vector<std::string> differing_fields(const ordered_json& a, const ordered_json& b) {
  std::vector<std::string> fields;
  for (const auto& [key, value] : a.items()) {
    if (!b.contains(key) || b[key] != value) fields.push_back(key);
  }
  for (const auto& [key, value] : b.items()) {
    if (!a.contains(key)) fields.push_back(key);
  }
  return fields;
}

}  // namespace

ordered_json row_context(const ordered_json& config) {
  ordered_json context = config;
  context.erase("sweep");
  // Models are known by their sha256: the same file elsewhere gives the same rows.
  for (const char* model : {"model", "draft_model"}) {
    if (context.contains(model) && context[model].is_object()) context[model].erase("path");
  }
  return context;
}

std::string prepare_results_dir(const std::string& parent, const std::string& name, const std::string& stem,
                                const ordered_json& config) {
  if (name == "latest" || name == "." || name == ".." || name.find('/') != std::string::npos) {
    fail("--name '{}' is not a folder name (no '/', not '.', '..' or 'latest')", name);
  }
  const ordered_json context = row_context(config);
  const std::filesystem::path dir =
      std::filesystem::path(parent) / (name.empty() ? stem + "-" + sha256_hex(context.dump()).substr(0, 8) : name);
  const std::filesystem::path config_path = dir / "config.json";
  const std::string text = config.dump(2) + "\n";
  if (!std::filesystem::exists(dir) && create_with_config(dir, text)) {
    link_latest(parent, dir);
    return dir.string();
  }
  {  // The folder was there, or another shard made it just now: it must hold this context.
    std::ifstream in(config_path, std::ios::binary);
    const ordered_json existing = ordered_json::parse(in, nullptr, false);
    if (existing.is_discarded()) {
      fail("'{}' exists and holds no readable config.json; move it away or pick another --name or -o", dir.string());
    }
    const std::vector<std::string> fields = differing_fields(row_context(existing), context);
    if (!fields.empty()) {
      fail("'{}' holds the results of another configuration (its config.json differs in: {}); move it away or pick "
           "another --name or -o",
           dir.string(), fmt::join(fields, ", "));
    }
  }
  write_atomically(config_path, text);
  link_latest(parent, dir);
  return dir.string();
}

}  // namespace deferkv::eval
