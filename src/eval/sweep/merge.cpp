// `deferkv eval merge`: the shards' folders joined into one results folder, checked first.
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "deferkv/error.h"
#include "deferkv/eval_sweep.h"
#include "eval/sweep/sample_log.h"
#include "eval/sweep/shards.h"
#include "eval/sweep/slots.h"

namespace deferkv::eval {
namespace {

using nlohmann::ordered_json;

ordered_json read_config(const std::filesystem::path& dir) {
  std::ifstream in(dir / "config.json", std::ios::binary);
  if (!in) fail("'{}' is not a results folder: it has no config.json", dir.string());
  const ordered_json config = ordered_json::parse(in, nullptr, false);
  if (config.is_discarded()) fail("'{}' is not valid JSON", (dir / "config.json").string());
  return config;
}

// "samples.shard-2-of-4.jsonl" → "shard 2/4"; "samples.jsonl" → "the unsharded run".
std::string shard_name(const std::string& file) {
  static const std::regex form(R"(samples\.shard-([0-9]+)-of-([0-9]+)\.jsonl)");
  std::smatch m;
  const std::string name = std::filesystem::path(file).filename().string();
  if (!std::regex_match(name, m, form)) return "the unsharded run";
  return fmt::format("shard {}/{}", m[1].str(), m[2].str());
}

// The shard count of the samples files, when they agree on one (0: none or several).
int64_t shard_count_of(const std::vector<std::string>& files) {
  static const std::regex form(R"(samples\.shard-[0-9]+-of-([0-9]+)\.jsonl)");
  int64_t count = 0;
  for (const std::string& file : files) {
    std::smatch m;
    const std::string name = std::filesystem::path(file).filename().string();
    if (!std::regex_match(name, m, form)) continue;
    const int64_t n = std::stoll(m[1].str());
    if (count != 0 && count != n) return 0;
    count = n;
  }
  return count;
}

}  // namespace

SweepPlan merge_results(const std::vector<std::string>& dirs, const std::string& out) {
  if (dirs.empty()) fail("eval merge: give the shards' results folders");
  const ordered_json config = read_config(dirs[0]);
  for (const std::string& dir : dirs) {
    if (std::filesystem::weakly_canonical(dir) == std::filesystem::weakly_canonical(out)) {
      fail("eval merge: -o '{}' is one of the folders merged; write the merge to a new folder", out);
    }
    // The model's path may differ from machine to machine; nothing else may.
    const ordered_json other = read_config(dir);
    if (row_context(other) != row_context(config) || other.value("sweep", ordered_json()) != config.value("sweep", ordered_json())) {
      fail("'{}' holds another configuration than '{}' (their config.json differ): shards of one sweep only", dir,
           dirs[0]);
    }
  }
  if (!SampleLog::files_in(out).empty()) fail("eval merge: '{}' already holds results; pick a new folder", out);
  const SweepPlan plan = plan_from_config(config);

  // key → (the file it came from, its line); every file of every folder.
  std::map<std::string, std::pair<std::string, nlohmann::json>> rows;
  std::vector<std::string> files;
  for (const std::string& dir : dirs) {
    for (const std::string& file : SampleLog::files_in(dir)) {
      files.push_back(file);
      for (nlohmann::json& record : SampleLog::read(file)) {
        const std::string key = SampleLog::key_of(record);
        const auto [it, added] = rows.try_emplace(key, file, std::move(record));
        if (!added) {
          fail("sample {} is in two shards: {} ('{}') and {} ('{}'); remove one of the lines", key,
               shard_name(it->second.first), it->second.first, shard_name(file), file);
        }
      }
    }
  }

  const std::vector<SampleSlot> slots = slots_of(plan);
  const int64_t shards = shard_count_of(files);
  std::vector<int64_t> costs;
  for (const SampleSlot& slot : slots) costs.insert(costs.end(), plan.methods.size(), slot.length);
  const std::vector<int64_t> shard_of = shards > 0 ? shard_of_rows(costs, shards) : std::vector<int64_t>();
  std::vector<std::string> identities;
  for (const SweepMethod& method : plan.methods) identities.push_back(method.identity());
  std::filesystem::create_directories(out);
  std::ofstream joined(std::filesystem::path(out) / "samples.jsonl", std::ios::binary | std::ios::trunc);
  for (size_t s = 0; s < slots.size(); ++s) {
    for (size_t m = 0; m < plan.methods.size(); ++m) {
      const auto it = rows.find(row_key(plan, identities[m], slots[s]));
      if (it == rows.end()) {
        const std::string owner =
            shards > 0 ? fmt::format(" (shard {}/{}'s)", shard_of[s * plan.methods.size() + m], shards) : "";
        fail("sample {}{} is in none of {}: run that shard again (it resumes), then merge",
             row_text(plan, plan.methods[m], slots[s]), owner, fmt::join(dirs, ", "));
      }
      joined << it->second.second.dump() << '\n';
    }
  }
  joined.close();
  if (!joined) fail("cannot write '{}/samples.jsonl'", out);
  std::ofstream config_out(std::filesystem::path(out) / "config.json", std::ios::binary | std::ios::trunc);
  config_out << config.dump(2) << "\n";
  if (!config_out) fail("cannot write '{}/config.json'", out);
  return plan;
}

}  // namespace deferkv::eval
