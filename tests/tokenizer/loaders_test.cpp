// Reading tokenizers from GGUF metadata and from Hugging Face files, and the errors for
// files that cannot be read. The GGUF and tokenizer.json files are written here from the
// vocabularies under tests/data/vocab, so each reader is checked on real vocabularies.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "deferkv/error.h"
#include "deferkv/tokenizer.h"
#include "tensor/gguf_file.h"
#include "tensor/gguf_writer.h"
#include "tokenizer/loaders.h"
#include "tokenizer/tokenizer_test_util.h"

namespace deferkv::test {
namespace {

namespace fs = std::filesystem;
using Ids = std::vector<int32_t>;
using nlohmann::json;

// A fresh folder for the running test's files, removed with it.
struct TempDir {
  TempDir() {
    const auto* info = testing::UnitTest::GetInstance()->current_test_info();
    path = fs::temp_directory_path() /
           (std::string("deferkv_tok_") + info->name() + "_" + std::to_string(getpid()));
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
  fs::path path;
};

void write_text(const fs::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

void expect_case_file(const Tokenizer& tokenizer, const std::string& name) {
  const VocabCases cases = read_vocab_cases(name);
  for (size_t i = 0; i < cases.texts.size(); ++i) {
    EXPECT_EQ(tokenizer.encode(cases.texts[i], false, false), cases.ids[i]) << name << " #" << i;
  }
}

// Message of the Error `body` throws ("" when it throws none).
template <typename Body>
std::string error_of(Body body) {
  try {
    body();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

GgufValue strings(const std::vector<std::string>& items) {
  std::vector<GgufValue> values;
  for (const auto& item : items) values.push_back(GgufValue::of_string(item));
  return GgufValue::of_array(GgufType::STRING, values);
}

TEST(GgufLoader, ByteLevelVocabularyWithLlama3Specials) {
  // The Llama-3 GGUF layout: 128000 base tokens, then 256 control tokens.
  TokenizerSpec raw = read_hf_tokenizer(vocab_path("llama3.2-bpe"), {"llama-bpe"});
  std::vector<std::string> tokens = raw.vocab.texts;
  std::vector<GgufValue> types(tokens.size(), GgufValue::of_i32(1));
  for (int i = 0; i < 256; ++i) {
    tokens.push_back(i == 0   ? "<|begin_of_text|>"
                     : i == 1 ? "<|end_of_text|>"
                     : i == 9 ? "<|eot_id|>"
                              : "<|reserved_special_token_" + std::to_string(i) + "|>");
    types.push_back(GgufValue::of_i32(3));
  }
  std::vector<std::string> merges;
  for (const auto& [a, b] : raw.merges) merges.push_back(a + " " + b);
  GgufWriter writer;
  writer.add_metadata("tokenizer.ggml.model", GgufValue::of_string("gpt2"));
  writer.add_metadata("tokenizer.ggml.pre", GgufValue::of_string("llama-bpe"));
  writer.add_metadata("tokenizer.ggml.tokens", strings(tokens));
  writer.add_metadata("tokenizer.ggml.token_type", GgufValue::of_array(GgufType::INT32, types));
  writer.add_metadata("tokenizer.ggml.merges", strings(merges));
  writer.add_metadata("tokenizer.ggml.bos_token_id", GgufValue::of_u32(128000));
  writer.add_metadata("tokenizer.ggml.eos_token_id", GgufValue::of_u32(128001));
  const TempDir dir;
  const fs::path path = dir.path / "llama3.gguf";
  writer.write(path.string());

  const auto tokenizer = Tokenizer::from_path(path.string());
  expect_case_file(*tokenizer, "llama-bpe");
  EXPECT_EQ(tokenizer->n_vocab(), 128256);
  // llama-bpe adds BOS when the file does not say (no add_bos_token key here).
  EXPECT_EQ(tokenizer->encode("Hello world", true, false), (Ids{128000, 9906, 1917}));
  EXPECT_EQ(tokenizer->encode("<|eot_id|>", false, true), (Ids{128009}));
  EXPECT_TRUE(tokenizer->is_end_of_generation(128009));
  EXPECT_TRUE(tokenizer->is_end_of_generation(128001));
}

TEST(GgufLoader, ErrorsNameTheKeyOrValue) {
  const TempDir temp;
  const fs::path& dir = temp.path;
  const auto write = [&](const std::string& name, const std::string& model, const std::string& pre,
                         bool with_tokens) {
    GgufWriter writer;
    writer.add_metadata("tokenizer.ggml.model", GgufValue::of_string(model));
    if (!pre.empty()) writer.add_metadata("tokenizer.ggml.pre", GgufValue::of_string(pre));
    if (with_tokens) {
      writer.add_metadata("tokenizer.ggml.tokens", strings({"a", "b", "ab"}));
      writer.add_metadata("tokenizer.ggml.merges", strings({"a b"}));
    }
    writer.write((dir / name).string());
    return (dir / name).string();
  };
  EXPECT_NE(error_of([&] {
              Tokenizer::from_path(write("a.gguf", "gpt2", "", false));
            }).find("'tokenizer.ggml.tokens' is missing"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              Tokenizer::from_path(write("b.gguf", "bert", "", true));
            }).find("tokenizer.ggml.model 'bert' is not supported"),
            std::string::npos);
  const std::string unknown_pre =
      error_of([&] { Tokenizer::from_path(write("c.gguf", "gpt2", "klingon", true)); });
  EXPECT_NE(unknown_pre.find("unknown pre-tokenizer 'klingon'"), std::string::npos);
  EXPECT_NE(unknown_pre.find("qwen2"), std::string::npos);  // lists the known ones
  // A tiny but complete vocabulary loads and merges.
  const auto tiny = Tokenizer::from_path(write("d.gguf", "gpt2", "gpt-2", true));
  EXPECT_EQ(tiny->encode("abab", false, false), (Ids{2, 2}));
}

TEST(HfLoader, TokenizerJsonByteLevel) {
  // Qwen2's vocab.json + merges.txt written as the tokenizer.json Qwen2 ships.
  json vocab = json::parse(read_file(vocab_path("qwen2/vocab.json")));
  json merges = json::array();
  std::istringstream lines(read_file(vocab_path("qwen2/merges.txt")));
  for (std::string line; std::getline(lines, line);) {
    if (!line.empty()) merges.push_back(line);
  }
  json added = json::array();
  for (const auto& [id, text] :
       {std::pair{151643, "<|endoftext|>"}, {151644, "<|im_start|>"}, {151645, "<|im_end|>"}}) {
    added.push_back({{"id", id}, {"content", text}, {"special", true}});
  }
  const json qwen2_split = {
      {"type", "Split"},
      {"pattern",
       {{"Regex",
         R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"}}},
      {"behavior", "Isolated"},
      {"invert", false}};
  const json root = {
      {"added_tokens", added},
      {"normalizer", {{"type", "NFC"}}},
      {"pre_tokenizer",
       {{"type", "Sequence"},
        {"pretokenizers",
         {qwen2_split,
          {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}}}}},
      {"post_processor", {{"type", "ByteLevel"}}},
      {"decoder", {{"type", "ByteLevel"}}},
      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merges}}}};
  const TempDir dir;
  const fs::path path = dir.path / "tokenizer.json";
  write_text(path, root.dump());

  const auto tokenizer = Tokenizer::from_path(path.string());
  expect_case_file(*tokenizer, "qwen2");
  EXPECT_EQ(tokenizer->pre_name(), "tokenizer.json");
  EXPECT_EQ(tokenizer->encode("<|im_start|>user\nHi<|im_end|>\n", true, true),
            (Ids{151644, 872, 198, 13048, 151645, 198}));
}

TEST(HfLoader, TokenizerJsonSentencePieceMatchesTheScoredVocabulary) {
  // Llama-2's vocabulary as Hugging Face converts it: merges of every two pieces that
  // join into a piece, ordered by that piece's score; U+2581 by normalizers.
  const GgufFile gguf(vocab_path("ggml-vocab-llama-spm.gguf"));
  const auto texts = gguf.get("tokenizer.ggml.tokens").as_array("").strings("");
  const auto scores = gguf.get("tokenizer.ggml.scores").as_array("").floats("");
  const auto types = gguf.get("tokenizer.ggml.token_type").as_array("").ints("");
  json vocab = json::object();
  std::map<std::string, int64_t> normal;
  for (size_t id = 0; id < texts.size(); ++id) {
    vocab[texts[id]] = id;
    if (types[id] == 1) normal[texts[id]] = static_cast<int64_t>(id);
  }
  std::vector<std::pair<float, std::string>> ranked;
  for (const auto& [text, id] : normal) {
    for (size_t cut = 1; cut < text.size(); ++cut) {
      if ((static_cast<uint8_t>(text[cut]) & 0xC0) == 0x80) continue;  // inside a character
      if (normal.count(text.substr(0, cut)) && normal.count(text.substr(cut))) {
        ranked.emplace_back(scores[id], text.substr(0, cut) + " " + text.substr(cut));
      }
    }
  }
  std::stable_sort(ranked.begin(), ranked.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  json merges = json::array();
  for (const auto& [score, merge] : ranked) merges.push_back(merge);
  const json root = {
      {"added_tokens",
       {{{"id", 0}, {"content", "<unk>"}, {"special", true}},
        {{"id", 1}, {"content", "<s>"}, {"special", true}},
        {{"id", 2}, {"content", "</s>"}, {"special", true}}}},
      {"normalizer",
       {{"type", "Sequence"},
        {"normalizers",
         {{{"type", "Prepend"}, {"prepend", "\xE2\x96\x81"}},
          {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "\xE2\x96\x81"}}}}}},
      {"pre_tokenizer", nullptr},
      {"post_processor",
       {{"type", "TemplateProcessing"},
        {"single",
         {{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}},
          {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}}}},
      {"model",
       {{"type", "BPE"},
        {"vocab", vocab},
        {"merges", merges},
        {"byte_fallback", true},
        {"unk_token", "<unk>"}}}};
  const TempDir dir;
  const fs::path path = dir.path / "tokenizer.json";
  write_text(path, root.dump());

  const auto tokenizer = Tokenizer::from_path(path.string());
  expect_case_file(*tokenizer, "llama-spm");
  EXPECT_EQ(tokenizer->model_name(), "llama");
  EXPECT_EQ(tokenizer->encode("Hello", true, false), (Ids{1, 15043}));
  EXPECT_EQ(tokenizer->token_kind(0), TokenKind::kUnknown);
}

TEST(HfLoader, ErrorsNameWhatIsMissing) {
  const TempDir temp;
  const fs::path& dir = temp.path;
  EXPECT_NE(error_of([&] { Tokenizer::from_path(dir.string()); }).find("found none of"),
            std::string::npos);
  EXPECT_NE(
      error_of([&] { Tokenizer::from_path((dir / "nothing.json").string()); }).find("no such file"),
      std::string::npos);
  write_text(dir / "tokenizer.json", R"({"model": {"type": "WordPiece", "vocab": {}}})");
  EXPECT_NE(error_of([&] {
              Tokenizer::from_path(dir.string());
            }).find("model type 'WordPiece' is not supported"),
            std::string::npos);
  fs::remove(dir / "tokenizer.json");
  // vocab.json + merges.txt whose tokenizer class does not tell the pre-tokenizer.
  write_text(dir / "vocab.json", R"({"a": 0, "b": 1, "ab": 2})");
  write_text(dir / "merges.txt", "a b\n");
  EXPECT_NE(
      error_of([&] { Tokenizer::from_path(dir.string()); }).find("cannot tell the pre-tokenizer"),
      std::string::npos);
  EXPECT_EQ(Tokenizer::from_path(dir.string(), {"gpt-2"})->encode("ab", false, false), Ids{2});
  write_text(dir / "tokenizer_config.json",
             R"({"tokenizer_class": "GPT2Tokenizer", "bos_token": "zz"})");
  EXPECT_NE(error_of([&] {
              Tokenizer::from_path(dir.string());
            }).find("bos_token 'zz' is not in the vocabulary"),
            std::string::npos);
}

TEST(HfLoader, TokenIdsThatAreNoInt32AreErrors) {
  // Found by fuzz/fuzz_hf_tokenizer.cpp: a float id was cast to int (undefined), and an
  // integer past int32 wrapped around to another token's id.
  const TempDir temp;
  const fs::path& dir = temp.path;
  write_text(dir / "vocab.json", R"({"a": 0, "b": 4294967297, "ab": 2})");
  write_text(dir / "merges.txt", "a b\n");
  EXPECT_NE(error_of([&] { Tokenizer::from_path(dir.string(), {"gpt-2"}); })
                .find("the id of 'b' is 4294967297, not an integer token id"),
            std::string::npos);
  fs::remove(dir / "vocab.json");
  fs::remove(dir / "merges.txt");
  write_text(dir / "tokenizer.json",
             R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 6.2e118}, "merges": []}})");
  EXPECT_NE(error_of([&] { Tokenizer::from_path(dir.string()); }).find("the id of 'b' is 6.2e+118"),
            std::string::npos);
  write_text(dir / "tokenizer.json",
             R"({"added_tokens": [{"id": -4294967296, "content": "<s>", "special": true}],)"
             R"( "model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}})");
  EXPECT_NE(error_of([&] { Tokenizer::from_path(dir.string()); }).find("the id of '<s>' is -4294967296"),
            std::string::npos);
}

}  // namespace
}  // namespace deferkv::test
