// `deferkv tokenize`: prints the tokens of a text, with llama-tokenize's flags and output.
//   deferkv tokenize -m model.gguf -p "Hello world"      "  9906 -> 'Hello'" per token
//   deferkv tokenize -m tokenizer.json -f prompt.txt --ids   [9906, 1917]
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "deferkv/error.h"
#include "deferkv/tokenizer.h"

namespace deferkv {
namespace {

struct TokenizeOptions {
  std::string model;
  std::string prompt;
  std::string file;
  bool ids = false;
  bool no_bos = false;
  bool parse_special = false;
};

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("tokenize: cannot open '{}'", path);
  std::ostringstream text;
  text << in.rdbuf();
  return std::move(text).str();
}

void run_tokenize(const TokenizeOptions& o) {
  if (o.prompt.empty() == o.file.empty()) fail("tokenize: give exactly one of -p and -f");
  const std::string text = o.file.empty() ? o.prompt : read_file(o.file);
  const auto tokenizer = Tokenizer::from_path(o.model);
  // As llama-tokenize: --no-bos turns off all special tokens the vocabulary would add.
  const std::vector<int32_t> ids = tokenizer->encode(text, !o.no_bos, o.parse_special);
  if (o.ids) {
    fmt::print("[{}]\n", fmt::join(ids, ", "));
    return;
  }
  for (int32_t id : ids) fmt::print("{:6d} -> '{}'\n", id, tokenizer->token_piece(id));
}

}  // namespace
}  // namespace deferkv

void add_tokenize_command(CLI::App& app) {
  auto options = std::make_shared<deferkv::TokenizeOptions>();
  CLI::App* cmd = app.add_subcommand("tokenize", "Print the tokens of a text");
  cmd->add_option("-m,--model", options->model, "GGUF model, tokenizer.json, or a tokenizer folder")
      ->required();
  cmd->add_option("-p,--prompt", options->prompt, "Text to tokenize");
  cmd->add_option("-f,--file", options->file, "File whose text to tokenize");
  cmd->add_flag("--ids", options->ids, "Print only the ids, as one JSON list");
  cmd->add_flag("--no-bos", options->no_bos, "Add no BOS (or EOS) even if the model asks for it");
  cmd->add_flag("--parse-special", options->parse_special,
                "Read special-token text such as <|im_start|> as those tokens");
  cmd->callback([options] { deferkv::run_tokenize(*options); });
}
