#pragma once
// Helpers for the GGUF tests: a scratch directory, whole-file read/write, and a builder of
// GGUF bytes by hand (for v2 files and for files no correct writer would produce).
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

#include "deferkv/error.h"
#include "tensor/gguf_file.h"

namespace deferkv::gguf_test {

// A fresh directory for one test, removed with everything in it at the end.
class TempDir {
 public:
  TempDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string name =
        fmt::format("deferkv-{}-{}-{}", info->test_suite_name(), info->name(), ::getpid());
    std::replace(name.begin(), name.end(), '/', '-');  // parameterised tests have '/' in names
    path_ = std::filesystem::temp_directory_path() / name;
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  std::string file(const std::string& name) const { return (path_ / name).string(); }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

inline std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

inline void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
}

// Little-endian GGUF bytes, appended piece by piece.
class GgufBytes {
 public:
  GgufBytes& u8(uint8_t v) { return raw(&v, 1); }
  GgufBytes& u32(uint32_t v) { return raw(&v, 4); }
  GgufBytes& u64(uint64_t v) { return raw(&v, 8); }
  GgufBytes& f32(float v) { return raw(&v, 4); }
  GgufBytes& str(std::string_view s) { return u64(s.size()).raw(s.data(), s.size()); }
  GgufBytes& raw(const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    bytes_.insert(bytes_.end(), b, b + n);
    return *this;
  }
  GgufBytes& zeros(size_t n) {
    bytes_.resize(bytes_.size() + n, 0);
    return *this;
  }
  GgufBytes& pad_to(size_t alignment) {
    return zeros((alignment - bytes_.size() % alignment) % alignment);
  }

  // "GGUF", version, tensor count, metadata count.
  GgufBytes& header(uint32_t version, uint64_t n_tensors, uint64_t n_kv) {
    return raw("GGUF", 4).u32(version).u64(n_tensors).u64(n_kv);
  }
  GgufBytes& kv_u32(std::string_view key, uint32_t v) { return str(key).u32(4).u32(v); }
  GgufBytes& kv_str(std::string_view key, std::string_view v) { return str(key).u32(8).str(v); }
  GgufBytes& tensor_info(std::string_view name, std::vector<uint64_t> ne, uint32_t type,
                         uint64_t offset) {
    str(name).u32(static_cast<uint32_t>(ne.size()));
    for (uint64_t extent : ne) u64(extent);
    return u32(type).u64(offset);
  }

  size_t size() const { return bytes_.size(); }
  const std::vector<uint8_t>& bytes() const { return bytes_; }
  void write(const std::string& path) const { write_bytes(path, bytes_); }

 private:
  std::vector<uint8_t> bytes_;
};

// The message of the Error that opening `path` throws; fails the test when none is thrown.
inline std::string open_error(const std::string& path) {
  try {
    GgufFile file(path);
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << path << " opened without an error";
  return "";
}

}  // namespace deferkv::gguf_test
