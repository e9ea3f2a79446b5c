#include "base/resource_dir.h"

#include <cstdlib>
#include <filesystem>
#include <system_error>

namespace deferkv {
namespace {

bool holds_models(const std::filesystem::path& dir) {
  std::error_code error;
  return std::filesystem::is_regular_file(dir / "models" / "stories260K.gguf", error);
}

}  // namespace

std::string resource_dir_for(const std::string& executable, const std::optional<std::string>& home,
                             const std::string& source_dir) {
  if (home && !home->empty()) return *home;
  if (!executable.empty()) {
    const std::filesystem::path parent = std::filesystem::path(executable).parent_path().parent_path();
    for (const std::filesystem::path& candidate : {parent, parent / "share" / "deferkv"}) {
      if (holds_models(candidate)) return candidate.string();
    }
  }
  return source_dir;
}

std::string resource_dir() {
  std::error_code error;
  const std::filesystem::path executable = std::filesystem::read_symlink("/proc/self/exe", error);
  const char* home = std::getenv("DEFERKV_HOME");
  return resource_dir_for(error ? std::string() : executable.string(),
                          home != nullptr ? std::optional<std::string>(home) : std::nullopt, DEFERKV_SOURCE_DIR);
}

}  // namespace deferkv
