#pragma once
// One folder per test process for files a test writes and later reads (random models,
// profiles), removed when the process exits. Per process because ctest runs several test
// processes side by side; removed so that a suite run leaves nothing behind in /tmp.
#include <unistd.h>

#include <filesystem>
#include <string>
#include <system_error>

namespace deferkv::testing {

class ScratchDir {
 public:
  ScratchDir()
      : owner_(::getpid()),
        path_(std::filesystem::temp_directory_path() / ("deferkv-test-" + std::to_string(owner_))) {
    std::filesystem::remove_all(path_);  // a folder left by a killed process with our pid
    std::filesystem::create_directories(path_);
  }
  ~ScratchDir() {
    if (::getpid() != owner_) return;  // a forked child leaving must not take its parent's files
    std::error_code ignored;           // never throw from a static destructor
    std::filesystem::remove_all(path_, ignored);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  const std::filesystem::path& path() const { return path_; }

 private:
  pid_t owner_;
  std::filesystem::path path_;
};

// The path of `name` in this process's scratch folder.
inline std::string scratch_file(const std::string& name) {
  static const ScratchDir dir;
  return (dir.path() / name).string();
}

}  // namespace deferkv::testing
