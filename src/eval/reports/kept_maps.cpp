#include "eval/reports/kept_maps.h"

#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "deferkv/error.h"
#include "eval/plots/kept_map.h"

namespace deferkv::eval {
namespace {

// "niah_single_1 #0 at 640 tokens", "needle at 50% depth of 600 tokens".
std::string sample_text(const TaskSample& sample) {
  if (sample.depth_percent >= 0) {
    return fmt::format("needle at {:g}% depth of {} tokens", sample.depth_percent, sample.target_length);
  }
  return fmt::format("{} #{} at {} tokens", sample.task, sample.index, sample.target_length);
}

}  // namespace

bool KeptMaps::wanted(const SweepMethod& method) const {
  return method.budget && !written_.contains(method.label()) &&
         !std::filesystem::exists(std::filesystem::path(dir_) / kept_map_file(method.label()));
}

void KeptMaps::write(const SweepMethod& method, const TaskSample& sample, const KeptSetRecorder& kept) {
  const std::string title = fmt::format("{}: KV positions kept per layer", method.label());
  const std::string subtitle = fmt::format("{}; {}", sample_text(sample), kept_summary_line(kept.kept()));
  const std::filesystem::path path = std::filesystem::path(dir_) / kept_map_file(method.label());
  std::ofstream out(path, std::ios::binary);
  out << kept_map_svg(kept.kept(), title, subtitle);
  if (!out) fail("cannot write '{}'", path.string());
  written_.insert(method.label());
}

}  // namespace deferkv::eval
