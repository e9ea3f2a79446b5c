// `deferkv tokenize`, run as the built CLI: llama-tokenize's output for the same input.
#include <sys/wait.h>

#include <cstdio>
#include <stdexcept>
#include <string>

#include <gtest/gtest.h>

#include "tokenizer/tokenizer_test_util.h"

namespace deferkv::test {
namespace {

struct CliResult {
  int status;
  std::string output;  // stdout and stderr
};

CliResult run_tokenize(const std::string& arguments) {
  const std::string command = std::string("'") + DEFERKV_CLI + "' tokenize " + arguments + " 2>&1";
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) throw std::runtime_error("cannot run " + command);
  CliResult result{0, ""};
  char buffer[4096];
  for (size_t n; (n = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0;)
    result.output.append(buffer, n);
  const int status = ::pclose(pipe);
  result.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
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
