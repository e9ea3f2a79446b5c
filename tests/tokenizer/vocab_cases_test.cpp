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
};

void PrintTo(const CaseFile& c, std::ostream* os) { *os << c.name; }

const CaseFile kCaseFiles[] = {
    {"llama-spm", "ggml-vocab-llama-spm.gguf", ""},
    {"phi-3", "ggml-vocab-phi-3.gguf", ""},
    {"gpt-2", "ggml-vocab-gpt-2.gguf", ""},
    {"deepseek-coder", "ggml-vocab-deepseek-coder.gguf", ""},
    {"deepseek-llm", "ggml-vocab-deepseek-llm.gguf", ""},
    {"falcon", "ggml-vocab-falcon.gguf", ""},
    {"starcoder", "ggml-vocab-starcoder.gguf", ""},
    {"mpt", "ggml-vocab-mpt.gguf", ""},
    {"refact", "ggml-vocab-refact.gguf", ""},
    // No GGUF of these could be had (over 4 MiB); the raw Hugging Face files stand in.
    {"llama-bpe", "llama3.2-bpe", "llama-bpe"},
    {"qwen2", "qwen2", ""},
    {"deepseek-r1-qwen", "qwen2", "deepseek-r1-qwen"},
};
// Not run: llama.cpp's case files for chameleon, command-r and roberta-bpe (no vocabulary
// file could be had) and bert-bge (a WordPiece vocabulary, a family deferkv does not
// implement).

class VocabCaseTest : public testing::TestWithParam<CaseFile> {};

TEST_P(VocabCaseTest, MatchesReferenceIdsAndDecodesBack) {
  const CaseFile& c = GetParam();
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
