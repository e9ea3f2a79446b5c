// `deferkv make-model`: write a random-weight GGUF of a chosen architecture, size and
// weight type (or llama.cpp mix of types), with the vocabulary of another GGUF (for tests
// and benchmarks).
#include <fmt/format.h>

#include "commands.h"
#include "common_options.h"
#include "deferkv/error.h"
#include "model/random_model.h"

namespace deferkv::cli {
namespace {

struct MakeModelArgs {
  std::string arch = "llama";
  std::string type = "f32";
  std::string preset;
  std::string vocab;
  std::string output;
  RandomModelSpec spec;
};

// Named sizes for benchmarks: about 100M and 500M parameters with the Llama-2 vocabulary.
void apply_preset(const std::string& preset, RandomModelSpec& s) {
  if (preset == "100m") {
    s.n_embd = 768, s.n_layer = 12, s.n_head = 12, s.n_head_kv = 4, s.n_ff = 2048;
  } else if (preset == "500m") {
    s.n_embd = 1536, s.n_layer = 16, s.n_head = 12, s.n_head_kv = 4, s.n_ff = 4096;
  } else if (preset != "") {
    fail("unknown preset '{}' (known: 100m, 500m)", preset);
  }
}

void run_make_model(MakeModelArgs& args) {
  RandomModelSpec& s = args.spec;
  if (args.arch == "llama") {
    s.arch = Architecture::kLlama;
  } else if (args.arch == "qwen2") {
    s.arch = Architecture::kQwen2;
  } else if (args.arch == "qwen3") {
    s.arch = Architecture::kQwen3;
  } else {
    fail("unknown architecture '{}' (known: llama, qwen2, qwen3)", args.arch);
  }
  // llama.cpp's mixes first: "q6_k" is one of them, which is every matrix Q6_K but for
  // llama.cpp's fallback on rows that do not fit its 256-value blocks.
  if (auto mix = weight_mix_from_name(args.type)) {
    s.mix = *mix;
  } else if (auto type = dtype_from_name(args.type)) {
    s.weight_type = *type;
  } else {
    fail("unknown weight type '{}' (known: {}; llama.cpp's mixes: {})", args.type, dtype_names(),
         weight_mix_names());
  }
  apply_preset(args.preset, s);
  if (args.vocab.empty()) args.vocab = default_model_path();
  write_random_model(s, args.vocab, args.output);
  fmt::print("wrote {}\n", args.output);
}

}  // namespace

void add_make_model_command(CLI::App& app) {
  auto args = std::make_shared<MakeModelArgs>();
  CLI::App* cmd = app.add_subcommand("make-model", "Write a random-weight GGUF model");
  RandomModelSpec& s = args->spec;
  cmd->add_option("-o,--output", args->output, "Output GGUF path")->required();
  cmd->add_option("--arch", args->arch, "Architecture: llama, qwen2, qwen3")->capture_default_str();
  cmd->add_option("--type", args->type,
                  "Weight type of every matrix: " + dtype_names() + "; or one of llama.cpp's mixes: " +
                      weight_mix_names())
      ->capture_default_str();
  cmd->add_option("--vocab", args->vocab, "GGUF whose tokenizer to copy (default: the embedded model)");
  cmd->add_option("--preset", args->preset, "Size preset: 100m or 500m (overrides the sizes)");
  cmd->add_option("--n-embd", s.n_embd, "Embedding size")->capture_default_str();
  cmd->add_option("--n-layer", s.n_layer, "Layers")->capture_default_str();
  cmd->add_option("--n-head", s.n_head, "Query heads")->capture_default_str();
  cmd->add_option("--n-head-kv", s.n_head_kv, "KV heads")->capture_default_str();
  cmd->add_option("--head-dim", s.head_dim, "Head size (default n_embd / n_head)");
  cmd->add_option("--n-ff", s.n_ff, "Feed-forward size")->capture_default_str();
  cmd->add_option("--ctx", s.n_ctx, "Training context length to record")->capture_default_str();
  cmd->add_option("--rope-base", s.rope_base, "RoPE frequency base")->capture_default_str();
  cmd->add_flag("--tied", s.tied_output, "Tie the output projection to the embeddings");
  cmd->add_flag("--llama3-rope", s.llama3_rope_factors, "Add Llama-3.1 RoPE frequency factors");
  cmd->add_option("--seed", s.seed, "Random seed")->capture_default_str();
  cmd->callback([args] { run_make_model(*args); });
}

}  // namespace deferkv::cli
