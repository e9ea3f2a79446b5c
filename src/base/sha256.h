#pragma once
// SHA-256 (FIPS 180-4), for recording which model file a result came from and checking
// the files deferkv writes. OpenSSL's libcrypto computes it: it uses the CPU's SHA
// instructions where there are some, which makes hashing a model file (a compressed
// context names its model by digest) several times faster than portable code.
#include <cstddef>
#include <string>
#include <string_view>

struct evp_md_ctx_st;

namespace deferkv {

class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;
  void update(const void* data, size_t size);
  // The digest as 64 lowercase hex digits; the object is spent afterwards.
  std::string hex_digest();

 private:
  evp_md_ctx_st* ctx_;  // OpenSSL's EVP_MD_CTX
};

std::string sha256_hex(std::string_view data);
// Streams the file; an Error names it when it cannot be read.
std::string sha256_file(const std::string& path);

}  // namespace deferkv
