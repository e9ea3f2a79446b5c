#include "eval_kept_maps.h"

#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "deferkv/error.h"
#include "eval/plots/kept_map.h"

namespace deferkv::cli {
namespace {

// "niah_single_1 #0 at 640 tokens", "needle at 50% depth of 600 tokens".
std::string sample_text(const eval::TaskSample& sample) {
  if (sample.depth_percent >= 0) {
    return fmt::format("needle at {:g}% depth of {} tokens", sample.depth_percent, sample.target_length);
  }
  return fmt::format("{} #{} at {} tokens", sample.task, sample.index, sample.target_length);
}

}  // namespace

bool KeptMaps::wanted(const eval::SweepMethod& method) const {
  return method.budget && !written_.contains(method.label()) &&
         !std::filesystem::exists(std::filesystem::path(dir_) / eval::kept_map_file(method.label()));
}

void KeptMaps::write(const eval::SweepMethod& method, const eval::TaskSample& sample, const KeptSetRecorder& kept) {
  const std::string title = fmt::format("{}: KV positions kept per layer", method.label());
  const std::string subtitle = fmt::format("{}; {}", sample_text(sample), kept_summary_line(kept.kept()));
  const std::filesystem::path path = std::filesystem::path(dir_) / eval::kept_map_file(method.label());
  std::ofstream out(path, std::ios::binary);
  out << eval::kept_map_svg(kept.kept(), title, subtitle);
  if (!out) fail("cannot write '{}'", path.string());
  written_.insert(method.label());
}

}  // namespace deferkv::cli
