#pragma once
// SHA-256 (FIPS 180-4), for recording which model file a result came from.
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace deferkv {

class Sha256 {
 public:
  Sha256();
  void update(const void* data, size_t size);
  // The digest as 64 lowercase hex digits; the object is spent afterwards.
  std::string hex_digest();

 private:
  void compress(const uint8_t* block);

  std::array<uint32_t, 8> state_;
  std::array<uint8_t, 64> buffer_{};
  size_t buffered_ = 0;
  uint64_t total_bytes_ = 0;
};

std::string sha256_hex(std::string_view data);
// Streams the file; an Error names it when it cannot be read.
std::string sha256_file(const std::string& path);

}  // namespace deferkv
