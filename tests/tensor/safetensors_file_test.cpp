// The safetensors reader: the file tools/train/export.py wrote (Python's own writer),
// hand-built files, and every malformed case it must refuse with a clear error.
#include "tensor/safetensors_file.h"

#include <gtest/gtest.h>

#include "deferkv/error.h"
#include "tensor/gguf_test_util.h"
#include "tensor/safetensors_test_util.h"

namespace deferkv {
namespace {

using gguf_test::TempDir;
using safetensors_test::f32_tensor;
using safetensors_test::RawTensor;
using safetensors_test::write_safetensors;

std::string error_of(const std::string& path) {
  try {
    SafetensorsFile file(path);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(SafetensorsFile, ReadsThePythonExportersFile) {
  const SafetensorsFile file(std::string(DEFERKV_TEST_DATA) + "/train/tiny.safetensors");
  EXPECT_EQ(file.metadata().at("architecture"), "llama");
  EXPECT_EQ(file.metadata().at("n_embd"), "64");
  const SafetensorsTensor& embd = file.tensor("token_embd.weight");
  EXPECT_EQ(embd.dtype, "F32");
  EXPECT_EQ(embd.shape, (std::vector<int64_t>{512, 64}));
  EXPECT_EQ(file.tensor("blk.1.attn_k.weight").shape, (std::vector<int64_t>{32, 64}));  // 2 KV heads of 16
  EXPECT_EQ(file.tensors().size(), 2u + 2u * 9u);
}

TEST(SafetensorsFile, RefusesMalformedFiles) {
  TempDir dir;
  const auto tensor = f32_tensor("w", {2, 2}, {1, 2, 3, 4});
  write_safetensors(dir.file("cut.safetensors"), {}, {tensor}, 3);
  EXPECT_NE(error_of(dir.file("cut.safetensors")).find("truncated file"), std::string::npos);

  RawTensor int_tensor{"i", "I32", {1}, {0, 0, 0, 0}};
  write_safetensors(dir.file("int.safetensors"), {}, {int_tensor});
  EXPECT_NE(error_of(dir.file("int.safetensors")).find("dtype I32"), std::string::npos);

  RawTensor short_tensor{"s", "F32", {3}, std::vector<uint8_t>(8)};
  write_safetensors(dir.file("short.safetensors"), {}, {short_tensor});
  EXPECT_NE(error_of(dir.file("short.safetensors")).find("holds 8 bytes, its shape and dtype need 12"),
            std::string::npos);

  std::ofstream(dir.file("tiny.safetensors"), std::ios::binary) << "abc";
  EXPECT_NE(error_of(dir.file("tiny.safetensors")).find("not a safetensors file"), std::string::npos);

  std::string huge_header(16, '\0');
  huge_header[6] = 1;  // a header size of 2^48 bytes
  std::ofstream(dir.file("huge.safetensors"), std::ios::binary) << huge_header;
  EXPECT_NE(error_of(dir.file("huge.safetensors")).find("header of"), std::string::npos);

  std::string not_json = std::string("\x04\0\0\0\0\0\0\0", 8) + "{[}]";
  std::ofstream(dir.file("json.safetensors"), std::ios::binary) << not_json;
  EXPECT_NE(error_of(dir.file("json.safetensors")).find("not a JSON object"), std::string::npos);

  write_safetensors(dir.file("good.safetensors"), {}, {tensor});
  const SafetensorsFile good(dir.file("good.safetensors"));
  try {
    good.tensor("missing");
    ADD_FAILURE() << "no error for a missing tensor";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no tensor 'missing'"), std::string::npos);
  }
}

}  // namespace
}  // namespace deferkv
