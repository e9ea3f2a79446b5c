// Every llama.cpp test-tokenizer-0 case file (ids produced by the models' own Hugging
// Face tokenizers) must come out exactly, and decode back to its text.
#include <gtest/gtest.h>

#include "deferkv/tokenizer.h"
#include "tokenizer/tokenizer_test_util.h"

namespace deferkv::test {
namespace {

struct CaseFile {
  const char* name;       // ggml-vocab-<name>.gguf.inp / .out
  const char* tokenizer;  // under tests/data/vocab
  const char* pre;        // TokenizerOptions::pre for files that do not name it
  const char* skip;       // why the case file cannot be run, or nullptr
};

void PrintTo(const CaseFile& c, std::ostream* os) { *os << c.name; }

const CaseFile kCaseFiles[] = {
    {"llama-spm", "ggml-vocab-llama-spm.gguf", "", nullptr},
    {"phi-3", "ggml-vocab-phi-3.gguf", "", nullptr},
    {"gpt-2", "ggml-vocab-gpt-2.gguf", "", nullptr},
    {"deepseek-coder", "ggml-vocab-deepseek-coder.gguf", "", nullptr},
    {"deepseek-llm", "ggml-vocab-deepseek-llm.gguf", "", nullptr},
    {"falcon", "ggml-vocab-falcon.gguf", "", nullptr},
    {"starcoder", "ggml-vocab-starcoder.gguf", "", nullptr},
    {"mpt", "ggml-vocab-mpt.gguf", "", nullptr},
    {"refact", "ggml-vocab-refact.gguf", "", nullptr},
    // No GGUF of these could be had (over 4 MiB); the raw Hugging Face files stand in.
    {"llama-bpe", "llama3.2-bpe", "llama-bpe", nullptr},
    {"qwen2", "qwen2", "", nullptr},
    {"deepseek-r1-qwen", "qwen2", "deepseek-r1-qwen", nullptr},
    {"bert-bge", nullptr, nullptr,
     "WordPiece (BERT) vocabulary: not a supported family; it needs NFD and lowercasing tables"},
    {"chameleon", nullptr, nullptr, "no vocabulary file could be had"},
    {"command-r", nullptr, nullptr, "no vocabulary file could be had (over 4 MiB)"},
    {"roberta-bpe", nullptr, nullptr, "no vocabulary file could be had"},
};

class VocabCaseTest : public testing::TestWithParam<CaseFile> {};

TEST_P(VocabCaseTest, MatchesReferenceIdsAndDecodesBack) {
  const CaseFile& c = GetParam();
  if (c.skip != nullptr) GTEST_SKIP() << c.skip;
  const Tokenizer& tokenizer = cached_tokenizer(c.tokenizer, c.pre);
  const VocabCases cases = read_vocab_cases(c.name);
  ASSERT_EQ(cases.texts.size(), cases.ids.size());
  ASSERT_GT(cases.texts.size(), 40u);
  for (size_t i = 0; i < cases.texts.size(); ++i) {
    const std::string& text = cases.texts[i];
    const auto ids = tokenizer.encode(text, false, false);
    EXPECT_EQ(ids, cases.ids[i]) << "case #" << i << ": '" << text << "'";
    EXPECT_EQ(tokenizer.decode(ids), text) << "case #" << i;
  }
}

INSTANTIATE_TEST_SUITE_P(AllCaseFiles, VocabCaseTest, testing::ValuesIn(kCaseFiles),
                         [](const testing::TestParamInfo<CaseFile>& info) {
                           std::string name = info.param.name;
                           for (char& ch : name) {
                             if (ch == '-') ch = '_';
                           }
                           return name;
                         });

}  // namespace
}  // namespace deferkv::test
