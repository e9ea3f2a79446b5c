// `deferkv tokenize`, run as the built CLI: llama-tokenize's output for the same input.
#include <string>

#include <gtest/gtest.h>

#include "tokenizer/tokenizer_test_util.h"
#include "tools/cli_runner.h"

namespace deferkv::test {
namespace {

using testing::CliResult;

// stdout and stderr of `deferkv tokenize <arguments>`.
CliResult run_tokenize(const std::string& arguments) {
  return testing::run_cli("tokenize " + arguments + " 2>&1");
}

const std::string kSpm = "-m '" + vocab_path("ggml-vocab-llama-spm.gguf") + "'";

TEST(TokenizeCommand, PrintsIdAndPiecePerLine) {
  const CliResult r = run_tokenize(kSpm + " -p 'Hello world'");
  EXPECT_EQ(r.status, 0);
  EXPECT_EQ(r.output, "     1 -> '<s>'\n 15043 -> ' Hello'\n  3186 -> ' world'\n");
}

TEST(TokenizeCommand, IdsFlagsAndFiles) {
  EXPECT_EQ(run_tokenize(kSpm + " -p 'Hello world' --ids").output, "[1, 15043, 3186]\n");
  EXPECT_EQ(run_tokenize(kSpm + " -p 'Hello world' --ids --no-bos").output, "[15043, 3186]\n");
  EXPECT_EQ(run_tokenize(kSpm + " -p 'a</s>' --ids --no-bos --parse-special").output, "[263, 2]\n");
  EXPECT_EQ(run_tokenize("-m '" + vocab_path("qwen2") + "' --ids -f '" +
                         vocab_path("ggml-vocab-qwen2.gguf.inp") + "'")
                .status,
            0);
}

TEST(TokenizeCommand, Errors) {
  const CliResult neither = run_tokenize(kSpm);
  EXPECT_EQ(neither.status, 1);
  EXPECT_NE(neither.output.find("give exactly one of -p and -f"), std::string::npos);
  const CliResult missing = run_tokenize("-m /no/such/tokenizer.json -p x");
  EXPECT_EQ(missing.status, 1);
  EXPECT_NE(missing.output.find("/no/such/tokenizer.json"), std::string::npos);
}

}  // namespace
}  // namespace deferkv::test
