// GgufFile on real model files and on hand-made v2 and vocab-only files.
#include "tensor/gguf_file.h"

#include <gtest/gtest.h>

#include <cstring>
#include <map>

#include "gguf_test_util.h"

namespace deferkv {
namespace {

using gguf_test::GgufBytes;
using gguf_test::read_bytes;
using gguf_test::TempDir;

const std::string kStories = DEFERKV_SOURCE_DIR "/models/stories260K.gguf";
const std::string kTinyRandom = DEFERKV_TEST_DATA "/models/llama-2-tiny-random.gguf";
const std::string kStoriesLlama2c = DEFERKV_TEST_DATA "/models/stories260K.bin";

std::vector<int64_t> shape(const GgufTensorInfo& t) {
  return {t.ne.begin(), t.ne.begin() + t.n_dims};
}

std::map<std::string, int> count_types(const GgufFile& file) {
  std::map<std::string, int> counts;
  for (const auto& t : file.tensors()) ++counts[ggml_type_name(t.ggml_type)];
  return counts;
}

// The data of the last tensor ends where the file ends.
void expect_data_fills_file(const GgufFile& file) {
  uint64_t end = 0;
  for (const auto& t : file.tensors()) end = std::max(end, t.offset + t.nbytes);
  EXPECT_EQ(file.data_offset() + end, file.file_size());
}

TEST(GgufFile, ReadsStories260K) {
  GgufFile file(kStories);
  EXPECT_EQ(file.version(), 3u);
  EXPECT_EQ(file.alignment(), 32u);
  EXPECT_EQ(file.metadata().size(), 19u);
  EXPECT_EQ(file.get_string("general.architecture"), "llama");
  EXPECT_EQ(file.get_u64("llama.block_count"), 5u);
  EXPECT_EQ(file.get_u64("llama.embedding_length"), 64u);
  EXPECT_EQ(file.get_u64("llama.feed_forward_length"), 172u);
  EXPECT_EQ(file.get_u64("llama.attention.head_count"), 8u);
  EXPECT_EQ(file.get_u64("llama.attention.head_count_kv"), 4u);
  EXPECT_EQ(file.get_u64("llama.context_length"), 2048u);
  EXPECT_FLOAT_EQ(static_cast<float>(file.get_f64_or("llama.attention.layer_norm_rms_epsilon", 0)),
                  1e-5f);
  EXPECT_EQ(file.get_string("tokenizer.ggml.model"), "llama");
  auto tokens = file.get("tokenizer.ggml.tokens").as_array("tokens").strings("tokens");
  ASSERT_EQ(tokens.size(), 512u);
  EXPECT_EQ(tokens[1], "<s>");
  EXPECT_EQ(tokens[2], "</s>");
  EXPECT_EQ(file.get("tokenizer.ggml.scores").as_array("scores").items.size(), 512u);
  EXPECT_EQ(file.get_u64("tokenizer.ggml.padding_token_id"), 4294967295u);

  ASSERT_EQ(file.tensors().size(), 48u);
  EXPECT_EQ(count_types(file), (std::map<std::string, int>{{"F32", 48}}));
  const auto* embd = file.find_tensor("token_embd.weight");
  ASSERT_NE(embd, nullptr);
  EXPECT_EQ(shape(*embd), (std::vector<int64_t>{64, 512}));
  EXPECT_EQ(shape(*file.find_tensor("output_norm.weight")), (std::vector<int64_t>{64}));
  EXPECT_EQ(shape(*file.find_tensor("blk.0.attn_q.weight")), (std::vector<int64_t>{64, 64}));
  EXPECT_EQ(shape(*file.find_tensor("blk.4.attn_k.weight")), (std::vector<int64_t>{64, 32}));
  EXPECT_EQ(shape(*file.find_tensor("blk.2.ffn_down.weight")), (std::vector<int64_t>{172, 64}));
  EXPECT_EQ(file.find_tensor("blk.5.attn_q.weight"), nullptr);
  expect_data_fills_file(file);

  // llama2.c checkpoint: a 7 x int32 header, then the token embedding table as f32.
  auto original = read_bytes(kStoriesLlama2c);
  ASSERT_GE(original.size(), 28 + embd->nbytes);
  EXPECT_EQ(embd->nbytes, 512u * 64 * 4);
  EXPECT_EQ(std::memcmp(embd->data, original.data() + 28, embd->nbytes), 0);
}

TEST(GgufFile, ReadsLlama2TinyRandom) {
  GgufFile file(kTinyRandom);
  EXPECT_EQ(file.version(), 3u);
  EXPECT_EQ(file.metadata().size(), 18u);
  EXPECT_EQ(file.get_string("general.architecture"), "llama");
  EXPECT_EQ(file.get_string("general.name"), "LLaMA v2");
  EXPECT_EQ(file.get_u64("general.file_type"), 1u);
  EXPECT_EQ(file.get_u64("llama.block_count"), 1u);
  EXPECT_EQ(file.get_u64("llama.embedding_length"), 8u);
  EXPECT_EQ(file.get_u64("llama.attention.head_count"), 2u);
  auto tokens = file.get("tokenizer.ggml.tokens").as_array("tokens").strings("tokens");
  ASSERT_EQ(tokens.size(), 32000u);
  EXPECT_EQ(tokens[0], "<unk>");
  EXPECT_EQ(tokens[13], "<0x0A>");

  ASSERT_EQ(file.tensors().size(), 12u);
  EXPECT_EQ(count_types(file), (std::map<std::string, int>{{"F16", 9}, {"F32", 3}}));
  const auto* embd = file.find_tensor("token_embd.weight");
  ASSERT_NE(embd, nullptr);
  EXPECT_EQ(embd->ggml_type, static_cast<uint32_t>(DType::F16));
  EXPECT_EQ(shape(*embd), (std::vector<int64_t>{8, 32000}));
  EXPECT_EQ(embd->nbytes, 8u * 32000 * 2);
  EXPECT_EQ(file.find_tensor("output_norm.weight")->ggml_type, static_cast<uint32_t>(DType::F32));
  expect_data_fills_file(file);
}

TEST(GgufFile, ReadsVersion2) {
  // Version 2 has the layout of version 3 (64-bit counts); only the number differs.
  TempDir dir;
  const float data[4] = {1.0f, -2.0f, 0.5f, 3.0f};
  GgufBytes bytes;
  bytes.header(2, 1, 2)
      .kv_str("general.architecture", "llama")
      .kv_u32("llama.block_count", 3)
      .tensor_info("t", {4}, 0, 0)
      .pad_to(32)
      .raw(data, sizeof(data));
  bytes.write(dir.file("v2.gguf"));

  GgufFile file(dir.file("v2.gguf"));
  EXPECT_EQ(file.version(), 2u);
  EXPECT_EQ(file.get_string("general.architecture"), "llama");
  EXPECT_EQ(file.get_u64("llama.block_count"), 3u);
  ASSERT_EQ(file.tensors().size(), 1u);
  EXPECT_EQ(file.data_offset(), 160u);  // 135 bytes of header, padded
  EXPECT_EQ(std::memcmp(file.tensors()[0].data, data, sizeof(data)), 0);
}

TEST(GgufFile, ReadsVocabOnlyFileWithoutPadding) {
  TempDir dir;
  GgufBytes bytes;
  bytes.header(3, 0, 2).kv_str("general.architecture", "llama");
  bytes.str("tokenizer.ggml.tokens").u32(9).u32(8).u64(2).str("<unk>").str("▁a");
  ASSERT_NE(bytes.size() % 32, 0u);
  bytes.write(dir.file("vocab.gguf"));

  GgufFile file(dir.file("vocab.gguf"));
  EXPECT_TRUE(file.tensors().empty());
  EXPECT_EQ(file.file_size(), bytes.size());
  auto tokens = file.get("tokenizer.ggml.tokens").as_array("tokens").strings("tokens");
  EXPECT_EQ(tokens, (std::vector<std::string>{"<unk>", "▁a"}));
}

TEST(GgufFile, MissingKeyErrorNamesFileAndKey) {
  GgufFile file(kStories);
  try {
    file.get_u64("llama.rope.freq_base");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'llama.rope.freq_base' is missing"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find(kStories), std::string::npos);
  }
}

}  // namespace
}  // namespace deferkv
