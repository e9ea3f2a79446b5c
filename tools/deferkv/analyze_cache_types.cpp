#include "analyze_cache_types.h"

#include <random>

#include <fmt/format.h>

#include "common_options.h"
#include "deferkv/error.h"
#include "deferkv/tokenizer.h"
#include "eval/analysis/cache_type_accuracy.h"

namespace deferkv::cli {
namespace {

struct CacheTypesArgs {
  std::string model;
  std::string file;
  int64_t random_tokens = 4096;  // without -f: this many random token ids (seed 42)
  std::vector<std::string> types = {"f16", "q8_0", "q4_0"};
  int64_t skip = 256;
  int threads = 1;
};

void run_cache_types(const CacheTypesArgs& args) {
  auto model = Model::load(args.model);
  std::vector<int32_t> tokens;
  if (!args.file.empty()) {
    tokens = model->tokenizer().encode(read_text_file(args.file), true, false);
  } else {
    std::mt19937 rng(42);
    std::uniform_int_distribution<int32_t> pick(0, static_cast<int32_t>(model->config().n_vocab - 1));
    for (int64_t i = 0; i < args.random_tokens; ++i) tokens.push_back(pick(rng));
  }
  std::vector<std::pair<std::string, std::string>> pairs;
  for (const std::string& t : args.types) {
    const size_t slash = t.find('/');  // "k/v", or one type for both
    pairs.emplace_back(t.substr(0, slash), slash == std::string::npos ? t : t.substr(slash + 1));
  }
  const auto results = eval::measure_cache_type_accuracy(model, make_thread_pool(args.threads), tokens, pairs, args.skip);
  fmt::print("model {}, {} prompt tokens, KL(f32 cache || cache) over positions {}..{}\n\n", args.model, tokens.size(),
             args.skip, tokens.size() - 1);
  fmt::print("| K | V | mean KL (nats) | max KL |\n| --- | --- | ---: | ---: |\n");
  for (const auto& r : results) fmt::print("| {} | {} | {:.3e} | {:.3e} |\n", r.type_k, r.type_v, r.mean_kl, r.max_kl);
}

}  // namespace

void add_analyze_cache_types_command(CLI::App& analyze) {
  auto args = std::make_shared<CacheTypesArgs>();
  CLI::App* cmd = analyze.add_subcommand(
      "cache-types", "Mean KL divergence of next-token distributions with each KV cache type against an f32 cache");
  add_model_option(*cmd, args->model);
  cmd->add_option("-f,--file", args->file, "Prompt file (default: random tokens)");
  cmd->add_option("--random-tokens", args->random_tokens, "Random prompt length without -f")->capture_default_str();
  cmd->add_option("--types", args->types, "Cache types compared: TYPE (keys and values alike) or K/V")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--skip", args->skip, "Leading positions left out")->capture_default_str();
  add_threads_option(*cmd, args->threads);
  cmd->callback([args] { run_cache_types(*args); });
}

}  // namespace deferkv::cli
