// `deferkv import-weights`: trained weights (safetensors with GGUF tensor names, see
// src/model/weights_import.h) plus a tokenizer GGUF become a GGUF model.
//
//   deferkv import-weights --weights model.safetensors --vocab ggml-vocab-llama-spm.gguf \
//       --type f16 -o models/model.gguf
#include <fmt/format.h>

#include "commands.h"
#include "deferkv/error.h"
#include "model/weights_import.h"

namespace deferkv::cli {
namespace {

struct ImportArgs {
  WeightsImport request;
  std::string type = "f16";
};

void run_import(ImportArgs& args) {
  const auto type = dtype_from_name(args.type);
  if (!type) fail("unknown weight type '{}' (known: {})", args.type, dtype_names());
  args.request.type = *type;
  import_weights(args.request);
  fmt::print("wrote {}\n", args.request.output);
}

}  // namespace

void add_import_weights_command(CLI::App& app) {
  auto args = std::make_shared<ImportArgs>();
  CLI::App* cmd = app.add_subcommand("import-weights", "Write a GGUF model from trained weights (safetensors) and a tokenizer GGUF");
  cmd->add_option("--weights", args->request.weights, "safetensors file with GGUF tensor names and hyperparameters")
      ->required();
  cmd->add_option("--vocab", args->request.vocab, "GGUF whose tokenizer to copy")->required();
  cmd->add_option("--type", args->type, "Type of the matrices: " + dtype_names())->capture_default_str();
  cmd->add_option("--name", args->request.name, "general.name (default: the weights' metadata name)");
  cmd->add_option("-o,--output", args->request.output, "Output GGUF path")->required();
  cmd->callback([args] { run_import(*args); });
}

}  // namespace deferkv::cli
