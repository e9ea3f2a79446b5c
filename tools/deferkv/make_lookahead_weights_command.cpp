// `deferkv make-lookahead-weights`: a LookaheadKV weights file of random values for a
// model (docs/lookaheadkv_weights.md), to run and time the press before trained weights
// exist. The embeddings are token embeddings of random tokens, so the rows have the
// model's own scale; A and B are Gaussian, B small.
#include <cmath>
#include <random>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "commands.h"
#include "common_options.h"
#include "deferkv/error.h"
#include "deferkv/model.h"
#include "kernels/quant.h"
#include "model/model_weights.h"
#include "press/methods/lookaheadkv/lookahead_weights.h"

namespace deferkv::cli {
namespace {

struct MakeLookaheadWeightsArgs {
  std::string model;
  std::string output;
  int64_t n_lookahead = 16;
  int64_t rank = 8;
  float alpha = 16.0f;
  std::vector<std::string> targets = {"q", "k", "v", "o"};
  uint64_t seed = 1;
};

std::vector<float> gaussian(int64_t n, float stddev, std::mt19937_64& rng) {
  std::normal_distribution<float> normal(0.0f, stddev);
  std::vector<float> out(static_cast<size_t>(n));
  for (float& v : out) v = normal(rng);
  return out;
}

void run_make_lookahead_weights(const MakeLookaheadWeightsArgs& args) {
  if (args.n_lookahead < 1 || args.rank < 1) fail("--n-lookahead and --rank must be at least 1");
  auto model = Model::load(args.model);
  const ModelConfig& c = model->config();
  std::mt19937_64 rng(args.seed);
  LookaheadWeights w;
  w.base_architecture = c.arch_name;
  w.base_n_embd = c.n_embd;
  w.base_n_layer = c.n_layer;
  w.lora_rank = args.rank;
  w.lora_alpha = args.alpha;
  for (const std::string& name : args.targets) {
    const auto p = projection_from_name(name);
    if (!p) fail("unknown target '{}' (known: q, k, v, o, gate, up, down)", name);
    w.targets.push_back(*p);
  }
  w.rows.n_embd = c.n_embd;
  w.rows.embeddings.resize(static_cast<size_t>(args.n_lookahead * c.n_embd));
  const WeightMatrix& embd = model->weights().token_embd;
  std::uniform_int_distribution<int64_t> token(0, embd.rows - 1);
  for (int64_t i = 0; i < args.n_lookahead; ++i) {
    dequantize_row(embd.type, embd.row(token(rng)), w.rows.embeddings.data() + i * c.n_embd, c.n_embd);
  }
  const PressModelShape shape{c.n_layer, c.n_head, c.n_head_kv, c.head_dim, c.n_embd, c.n_ff};
  w.rows.layers.resize(static_cast<size_t>(c.n_layer));
  for (auto& layer : w.rows.layers) {
    for (Projection p : w.targets) {
      const auto [in, out] = projection_widths(p, shape);
      layer[static_cast<size_t>(p)] = {args.rank, in, out, args.alpha / static_cast<float>(args.rank),
                                       gaussian(args.rank * in, 1.0f / std::sqrt(static_cast<float>(in)), rng),
                                       gaussian(out * args.rank, 0.01f, rng)};
    }
  }
  save_lookahead_weights(args.output, w);
  fmt::print("wrote {} ({} lookahead rows, rank {}, targets {})\n", args.output, args.n_lookahead, args.rank,
             fmt::join(args.targets, ","));
}

}  // namespace

void add_make_lookahead_weights_command(CLI::App& app) {
  auto args = std::make_shared<MakeLookaheadWeightsArgs>();
  CLI::App* cmd = app.add_subcommand("make-lookahead-weights",
                                     "Write a LookaheadKV weights file of random values for a model (for tests and benchmarks)");
  add_model_option(*cmd, args->model);
  cmd->add_option("-o,--output", args->output, "Output GGUF path")->required();
  cmd->add_option("--n-lookahead", args->n_lookahead, "Lookahead rows")->capture_default_str();
  cmd->add_option("--rank", args->rank, "LoRA rank")->capture_default_str();
  cmd->add_option("--alpha", args->alpha, "LoRA alpha (deltas are scaled by alpha / rank)")->capture_default_str();
  cmd->add_option("--targets", args->targets, "Projections with a delta: q, k, v, o, gate, up, down")
      ->delimiter(',')->capture_default_str();
  cmd->add_option("--seed", args->seed, "Random seed")->capture_default_str();
  cmd->callback([args] { run_make_lookahead_weights(*args); });
}

}  // namespace deferkv::cli
