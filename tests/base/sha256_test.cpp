// SHA-256 against the FIPS 180-4 examples and a digest computed by sha256sum.
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "base/sha256.h"
#include "deferkv/error.h"
#include "tensor/gguf_test_util.h"

namespace deferkv {
namespace {

TEST(Sha256, FipsExamples) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(sha256_hex(std::string(1000000, 'a')), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256, PiecewiseUpdatesEqualOneUpdate) {
  const std::string text(300, 'x');
  Sha256 hash;
  for (size_t i = 0; i < text.size(); i += 7) hash.update(text.data() + i, std::min<size_t>(7, text.size() - i));
  EXPECT_EQ(hash.hex_digest(), sha256_hex(text));
}

TEST(Sha256, FileDigestAndMissingFile) {
  // sha256sum of the embedded default model, as the NOTICE file records it.
  EXPECT_EQ(sha256_file(std::string(DEFERKV_SOURCE_DIR) + "/models/stories260K.gguf"),
            "270cba1bd5109f42d03350f60406024560464db173c0e387d91f0426d3bd256d");
  EXPECT_THROW(sha256_file("/nonexistent/model.gguf"), Error);
}

}  // namespace
}  // namespace deferkv
