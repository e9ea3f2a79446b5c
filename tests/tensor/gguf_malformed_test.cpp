// Malformed GGUF files: each gives an Error that names the file and the problem, never a
// crash or a huge allocation (run these under ASan to see the latter).
#include <gtest/gtest.h>

#include "gguf_test_util.h"
#include "tensor/gguf_file.h"
#include "tensor/gguf_writer.h"

namespace deferkv {
namespace {

using gguf_test::GgufBytes;
using gguf_test::open_error;
using gguf_test::read_bytes;
using gguf_test::TempDir;
using gguf_test::write_bytes;

constexpr uint64_t kHuge = uint64_t{1} << 62;
constexpr uint32_t kF32 = 0;
constexpr uint32_t kArray = 9;

class GgufMalformed : public ::testing::Test {
 protected:
  // Opening `bytes` must fail with a message naming the file and holding `part`.
  void expect_error(const std::vector<uint8_t>& bytes, const std::string& part) {
    write_bytes(path_, bytes);
    std::string message = open_error(path_);
    EXPECT_NE(message.find(part), std::string::npos) << "message: " << message;
    EXPECT_NE(message.find(path_), std::string::npos) << "message: " << message;
  }
  void expect_error(const GgufBytes& bytes, const std::string& part) {
    expect_error(bytes.bytes(), part);
  }

  // A file whose one tensor, "t", has the given shape, type id and offset, then 32 data bytes.
  static GgufBytes one_tensor(std::vector<uint64_t> ne, uint32_t type, uint64_t offset) {
    GgufBytes bytes;
    bytes.header(3, 1, 0).tensor_info("t", std::move(ne), type, offset).pad_to(32).zeros(32);
    return bytes;
  }

  static GgufBytes with_alignment(uint32_t alignment) {
    GgufBytes bytes;
    bytes.header(3, 1, 1).kv_u32("general.alignment", alignment).tensor_info("t", {4}, kF32, 0);
    return bytes.pad_to(64).zeros(64);
  }

  TempDir dir_;
  std::string path_ = dir_.file("bad.gguf");
};

TEST_F(GgufMalformed, EmptyFile) { expect_error(GgufBytes(), "not a GGUF file"); }

TEST_F(GgufMalformed, BadMagic) {
  expect_error(GgufBytes().raw("GGML", 4).u32(3).u64(0).u64(0), "not a GGUF file");
}

TEST_F(GgufMalformed, UnsupportedVersions) {
  expect_error(GgufBytes().header(1, 0, 0), "GGUF version 1 is obsolete");
  expect_error(GgufBytes().header(99, 0, 0), "unsupported GGUF version 99");
  expect_error(GgufBytes().header(0x03000000, 0, 0), "big-endian");
}

// A small valid file: metadata of several types and two tensors whose data ends the file.
std::vector<uint8_t> small_valid_file(const std::string& path) {
  GgufWriter writer;
  writer.add_metadata("general.architecture", GgufValue::of_string("llama"));
  writer.add_metadata("llama.block_count", GgufValue::of_u32(2));
  writer.add_metadata("eps", GgufValue::of_f32(1e-5f));
  writer.add_metadata("flag", GgufValue::of_bool(true));
  writer.add_metadata("tokens",
                      GgufValue::of_array(GgufType::STRING,
                                          {GgufValue::of_string("a"), GgufValue::of_string("bc")}));
  writer.add_metadata(
      "nested",
      GgufValue::of_array(GgufType::ARRAY,
                          {GgufValue::of_array(GgufType::INT32, {GgufValue::of_i32(5)})}));
  std::vector<float> a(3, 1.0f), b(8, 2.0f);
  writer.add_tensor("a", DType::F32, {3}, a.data(), 12);
  writer.add_tensor("b", DType::F32, {8}, b.data(), 32);  // 32 bytes: no padding at the end
  writer.write(path);
  return read_bytes(path);
}

TEST_F(GgufMalformed, EveryPrefixOfAValidFileIsTruncated) {
  const auto whole = small_valid_file(path_);
  ASSERT_NO_THROW(GgufFile{path_});
  for (size_t n = 0; n < whole.size(); ++n) {
    SCOPED_TRACE(n);
    expect_error(std::vector<uint8_t>(whole.begin(), whole.begin() + n),
                 n < 4 ? "not a GGUF file" : "truncated");
  }
}

TEST_F(GgufMalformed, TruncatedTensorData) {
  auto bytes = small_valid_file(path_);
  bytes.pop_back();
  expect_error(bytes, "tensor 'b' (32 bytes at data offset 32) lies beyond the end of the file");
}

TEST_F(GgufMalformed, TensorOffsetOutOfRange) {
  expect_error(one_tensor({4}, kF32, 64), "tensor 't' (16 bytes at data offset 64) lies beyond");
  expect_error(one_tensor({4}, kF32, ~uint64_t{31}), "lies beyond the end of the file");
}

TEST_F(GgufMalformed, TensorOffsetNotAligned) {
  expect_error(one_tensor({4}, kF32, 4), "offset 4, not a multiple of the alignment 32");
}

TEST_F(GgufMalformed, AbsurdCounts) {
  expect_error(GgufBytes().header(3, kHuge, 0), "absurd tensor count 4611686018427387904");
  expect_error(GgufBytes().header(3, 0, kHuge), "absurd metadata count 4611686018427387904");
  expect_error(GgufBytes().header(3, 0, 1).str("a").u32(kArray).u32(4).u64(kHuge),
               "'a' claims 4611686018427387904 array elements");
  expect_error(GgufBytes().header(3, 0, 1).str("a").u32(kArray).u32(kArray).u64(kHuge),
               "'a' claims 4611686018427387904 array elements");
  expect_error(GgufBytes().header(3, 0, 1).str("a").u32(kArray).u32(8).u64(2).u64(kHuge).zeros(16),
               "absurd length 4611686018427387904");
}

TEST_F(GgufMalformed, ArrayTooLongForMemoryThoughTheFileHoldsIt) {
  const uint64_t count = (uint64_t{1} << 24) + 1;  // 16 MiB of UINT8 would be 800 MiB of values
  GgufBytes bytes;
  bytes.header(3, 0, 1).str("k").u32(kArray).u32(0).u64(count).zeros(count);
  expect_error(
      bytes, "metadata 'k' claims 16777217 array elements, more than the 16777216 deferkv accepts");
}

TEST_F(GgufMalformed, AbsurdStringLengths) {
  expect_error(GgufBytes().header(3, 0, 1).u64(kHuge).zeros(64),
               "metadata key has an absurd length");
  expect_error(GgufBytes().header(3, 0, 1).str("a").u32(8).u64(kHuge).zeros(64),
               "string value has an absurd length");
  expect_error(GgufBytes().header(3, 1, 0).u64(kHuge).zeros(64),
               "tensor name has an absurd length");
  // Not absurd, just longer than the file.
  expect_error(GgufBytes().header(3, 0, 1).str("a").u32(8).u64(1000).zeros(64), "truncated");
}

TEST_F(GgufMalformed, BadRank) {
  expect_error(one_tensor({}, kF32, 0), "tensor 't' has 0 dimensions");
  expect_error(one_tensor({1, 1, 1, 1, 1}, kF32, 0), "tensor 't' has 5 dimensions");
}

TEST_F(GgufMalformed, BadDimensions) {
  expect_error(one_tensor({4, 0}, kF32, 0), "tensor 't' has an invalid dimension 0");
  expect_error(one_tensor({kHuge}, kF32, 0),
               "tensor 't' has an invalid dimension 4611686018427387904");
  // Each extent is fine, the product is not.
  expect_error(one_tensor({1u << 30, 1u << 30}, kF32, 0), "tensor 't' has too many elements");
}

TEST_F(GgufMalformed, UnknownTensorType) {
  expect_error(one_tensor({4}, 77, 0), "tensor 't' has unknown type id 77");
}

TEST_F(GgufMalformed, RowLengthNotAMultipleOfTheBlock) {
  expect_error(one_tensor({33}, 8, 0),
               "tensor 't' of type Q8_0 has row length 33, not a multiple "
               "of its block size 32");
}

TEST_F(GgufMalformed, BadAlignment) {
  for (uint32_t a : {0u, 3u, 48u, 1u << 30}) {
    SCOPED_TRACE(a);
    expect_error(with_alignment(a),
                 "general.alignment is " + std::to_string(a) + ", which is not a power of two");
  }
  GgufBytes text;
  text.header(3, 0, 1).kv_str("general.alignment", "32");
  expect_error(text, "general.alignment should be an unsigned integer but is STRING");
}

TEST_F(GgufMalformed, DuplicateKey) {
  expect_error(GgufBytes().header(3, 0, 2).kv_u32("k", 1).kv_u32("k", 2),
               "metadata key 'k' appears twice");
}

TEST_F(GgufMalformed, DuplicateTensorName) {
  GgufBytes bytes;
  bytes.header(3, 2, 0)
      .tensor_info("t", {4}, kF32, 0)
      .tensor_info("t", {4}, kF32, 32)
      .pad_to(32)
      .zeros(64);
  expect_error(bytes, "tensor 't' appears twice");
}

// Tensors that share bytes: each alone lies inside the file, but a loader that copies
// every matrix would copy the same bytes once per tensor.
TEST_F(GgufMalformed, TensorsThatShareBytes) {
  GgufBytes same;
  same.header(3, 2, 0).tensor_info("a", {8}, kF32, 0).tensor_info("b", {8}, kF32, 0).pad_to(32).zeros(64);
  expect_error(same, "tensors 'a' (32 bytes at data offset 0) and 'b' (at 0) share bytes");
  GgufBytes partly;
  partly.header(3, 2, 0).tensor_info("a", {16}, kF32, 32).tensor_info("b", {16}, kF32, 0).pad_to(32).zeros(96);
  expect_error(partly, "tensors 'b' (64 bytes at data offset 0) and 'a' (at 32) share bytes");
  GgufBytes apart;  // touching is fine
  apart.header(3, 2, 0).tensor_info("a", {8}, kF32, 32).tensor_info("b", {8}, kF32, 0).pad_to(32).zeros(64);
  write_bytes(path_, apart.bytes());
  EXPECT_NO_THROW(GgufFile{path_});
}

TEST_F(GgufMalformed, NonUtf8Names) {
  expect_error(GgufBytes().header(3, 0, 1).kv_u32("bad\xff", 1),
               "metadata key #0 is not valid UTF-8");
  GgufBytes bytes;
  bytes.header(3, 1, 0).tensor_info("\xc0\x80", {4}, kF32, 0).pad_to(32).zeros(32);  // overlong NUL
  expect_error(bytes, "the name of tensor #0 is not valid UTF-8");
}

TEST_F(GgufMalformed, UnknownValueType) {
  expect_error(GgufBytes().header(3, 0, 1).str("k").u32(13).u32(0),
               "metadata 'k' has unknown value type 13");
  expect_error(GgufBytes().header(3, 0, 1).str("k").u32(kArray).u32(200).u64(1).u32(0),
               "metadata 'k' has unknown value type 200");
}

TEST_F(GgufMalformed, BoolValueTwo) {
  expect_error(GgufBytes().header(3, 0, 1).str("k").u32(7).u8(2),
               "metadata 'k' has a BOOL value of 2");
  expect_error(GgufBytes().header(3, 0, 1).str("k").u32(kArray).u32(7).u64(2).u8(1).u8(255),
               "metadata 'k' has a BOOL value of 255");
}

TEST_F(GgufMalformed, ArraysNestedTooDeep) {
  GgufBytes bytes;
  bytes.header(3, 0, 1).str("k").u32(kArray);
  for (int d = 0; d < 5; ++d) bytes.u32(kArray).u64(1);
  bytes.u32(4).u64(0);
  expect_error(bytes, "metadata 'k' nests arrays deeper than 4");
}

TEST_F(GgufMalformed, NotAFile) {
  EXPECT_NE(open_error(dir_.path().string()).find("is not a regular file"), std::string::npos);
  EXPECT_NE(open_error(dir_.file("missing.gguf")).find("cannot open"), std::string::npos);
}

}  // namespace
}  // namespace deferkv
