// The results folder of a configuration: named from it, never given to another one.
#include <filesystem>
#include <fstream>
#include <sstream>

#include "base/sha256.h"
#include "deferkv/error.h"
#include "deferkv/eval_sweep.h"

namespace deferkv::eval {

std::string prepare_results_dir(const std::string& parent, const std::string& stem,
                                const nlohmann::ordered_json& config) {
  const std::string text = config.dump(2) + "\n";
  const std::filesystem::path dir = std::filesystem::path(parent) / (stem + "-" + sha256_hex(text).substr(0, 8));
  const std::filesystem::path config_path = dir / "config.json";
  if (std::filesystem::exists(dir)) {
    std::ifstream in(config_path, std::ios::binary);
    std::ostringstream existing;
    existing << in.rdbuf();
    if (!in || existing.str() != text) {
      fail("'{}' exists and does not hold the results of this configuration (its config.json differs or is "
           "missing); move it away or pick another output folder", dir.string());
    }
    return dir.string();
  }
  std::filesystem::create_directories(dir);
  std::ofstream out(config_path, std::ios::binary);
  out << text;
  if (!out) fail("cannot write '{}'", config_path.string());
  return dir.string();
}

}  // namespace deferkv::eval
