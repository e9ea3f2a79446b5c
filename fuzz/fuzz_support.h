#pragma once
// What every fuzz target shares: a scratch folder for the readers that take a path, the
// input cut into fields, and the two properties every target asserts: only
// deferkv::Error escapes a reader, and a stated invariant that fails aborts the run
// (so libFuzzer records the input) with a message saying which one broke.
#include <sanitizer/allocator_interface.h>
#include <unistd.h>

#include <atomic>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <typeinfo>
#include <utility>
#include <vector>

#include "deferkv/error.h"

namespace deferkv::fuzz {

// A folder of this process's own, removed when the process exits normally.
class ScratchDir {
 public:
  ScratchDir() {
    path_ = std::filesystem::temp_directory_path() / ("deferkv-fuzz-" + std::to_string(::getpid()));
    std::filesystem::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  // Writes `bytes` to `name` in the folder (replacing it) and returns its path.
  std::string write(const std::string& name, std::string_view bytes) const {
    const std::string path = (path_ / name).string();
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out) fail_invariant("cannot write the scratch file " + path);
    return path;
  }
  void remove(const std::string& name) const {
    std::error_code ignored;
    std::filesystem::remove(path_ / name, ignored);
  }
  std::string path() const { return path_.string(); }

 private:
  [[noreturn]] static void fail_invariant(const std::string& what) {
    std::fprintf(stderr, "fuzz setup failed: %s\n", what.c_str());
    std::abort();
  }
  std::filesystem::path path_;
};

inline std::string_view as_text(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// The input cut at each NUL byte: the fields of targets that read several strings or
// files. Text formats never hold a raw NUL, so no field loses an interesting byte.
inline std::vector<std::string_view> split_fields(std::string_view input) {
  std::vector<std::string_view> fields;
  size_t start = 0;
  for (size_t i = 0; i <= input.size(); ++i) {
    if (i == input.size() || input[i] == '\0') {
      fields.push_back(input.substr(start, i - start));
      start = i + 1;
    }
  }
  return fields;
}

// An invariant the target states; when it fails the run aborts naming it.
inline void require(bool holds, const char* invariant) {
  if (holds) return;
  std::fprintf(stderr, "fuzz invariant broken: %s\n", invariant);
  std::abort();
}

// Runs `body`; an `Expected` error (a deferkv::Error or a type derived from it) is the
// expected answer to bad input and goes to `on_error` for its own checks, anything else
// (another exception type) aborts, naming it. Returns true when nothing was thrown.
template <typename Expected, typename Body, typename OnError>
bool accepts_as(Body&& body, OnError&& on_error) {
  try {
    body();
    return true;
  } catch (const Expected& e) {
    require(*e.what() != '\0', "an Error names the problem");
    on_error(e);
    return false;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fuzz invariant broken: %s escaped instead of %s: %s\n", typeid(e).name(),
                 typeid(Expected).name(), e.what());
    std::abort();
  }
}

// accepts_as for deferkv::Error, with no further checks.
template <typename Body>
bool accepts(Body&& body) {
  return accepts_as<Error>(std::forward<Body>(body), [](const Error&) {});
}

// The most heap the process held at once while `body` ran, above what it held before:
// counted through the sanitizer allocator's hooks (the targets always run under ASan), so
// a target can bound what a reader builds by the size of what it read.
class HeapMeter {
 public:
  template <typename Body>
  static int64_t peak_during(Body&& body) {
    install();
    const int64_t before = live_.load();
    peak_.store(before);
    body();
    return peak_.load() - before;
  }

 private:
  static void install() {
    static const bool installed = [] {
      __sanitizer_install_malloc_and_free_hooks(&on_malloc, &on_free);
      return true;
    }();
    (void)installed;
  }
  static void on_malloc(const volatile void*, size_t size) {
    const int64_t live = live_.fetch_add(static_cast<int64_t>(size)) + static_cast<int64_t>(size);
    int64_t peak = peak_.load(std::memory_order_relaxed);
    while (live > peak && !peak_.compare_exchange_weak(peak, live, std::memory_order_relaxed)) {
    }
  }
  static void on_free(const volatile void* p) {
    live_.fetch_sub(static_cast<int64_t>(__sanitizer_get_allocated_size(const_cast<const void*>(p))));
  }
  static inline std::atomic<int64_t> live_{0};
  static inline std::atomic<int64_t> peak_{0};
};

}  // namespace deferkv::fuzz
