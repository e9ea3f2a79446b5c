// `deferkv tokenize`: prints the tokens of a text, with llama-tokenize's flags and output.
//   deferkv tokenize -m model.gguf -p "Hello world"         "  9906 -> 'Hello'" per token
//   deferkv tokenize -m tokenizer.json -f prompt.txt --ids   [9906, 1917]
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <memory>
#include <string>
#include <vector>

#include "commands.h"
#include "common_options.h"
#include "escapes.h"
#include "deferkv/error.h"
#include "deferkv/tokenizer.h"

namespace deferkv::cli {
namespace {

struct TokenizeArgs {
  std::string model;
  std::string prompt;
  std::string file;
  bool no_escape = false;
  bool ids = false;
  bool no_bos = false;
  bool parse_special = false;
};

void run_tokenize(const TokenizeArgs& args) {
  if (args.prompt.empty() == args.file.empty()) fail("tokenize: give exactly one of -p and -f");
  const std::string text =
      !args.file.empty() ? read_text_file(args.file) : args.no_escape ? args.prompt : process_escapes(args.prompt);
  const auto tokenizer = Tokenizer::from_path(args.model);
  // As llama-tokenize: --no-bos turns off every special token the vocabulary would add.
  const std::vector<int32_t> ids = tokenizer->encode(text, !args.no_bos, args.parse_special);
  if (args.ids) {
    fmt::print("[{}]\n", fmt::join(ids, ", "));
    return;
  }
  for (int32_t id : ids) fmt::print("{:6d} -> '{}'\n", id, tokenizer->token_piece(id));
}

}  // namespace

void add_tokenize_command(CLI::App& app) {
  auto args = std::make_shared<TokenizeArgs>();
  CLI::App* cmd = app.add_subcommand("tokenize", "Print the tokens of a text");
  add_model_option(*cmd, args->model);
  cmd->get_option("--model")->description(
      "GGUF model, tokenizer.json, or a folder of Hugging Face tokenizer files "
      "(default: the embedded stories260K)");
  cmd->add_option("-p,--prompt", args->prompt, "Text to tokenize (escapes such as \\n are processed)");
  cmd->add_flag("--no-escape", args->no_escape, "Take -p as it is, without processing \\n, \\t, \\xHH ...");
  cmd->add_option("-f,--file", args->file, "File whose text to tokenize");
  cmd->add_flag("--ids", args->ids, "Print only the ids, as one JSON list");
  cmd->add_flag("--no-bos", args->no_bos, "Add no BOS (or EOS) even if the model asks for it");
  cmd->add_flag("--parse-special", args->parse_special,
                "Read special-token text such as <|im_start|> as those tokens");
  cmd->callback([args] { run_tokenize(*args); });
}

}  // namespace deferkv::cli
