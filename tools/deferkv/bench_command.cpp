// `deferkv bench`: llama-bench-like throughput measurement: prompt processing (pp N)
// and token generation (tg N), optionally at a context depth D, for each thread count,
// repeated, reported as mean ± std tokens/s in Markdown or JSON. With several KV cache
// types (-ctk/-ctv lists) each test runs on one session per type pair, the repetitions
// alternating between them, so a drift of the machine's speed falls on every pair alike.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <random>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "base/thread_pool.h"
#include "commands.h"
#include "common_options.h"
#include "deferkv/error.h"
#include "deferkv/session.h"
#include "kernels/gemm_int16.h"
#include "kernels/matvec.h"
#include "kernels/row_groups.h"
#include "kernels/simd_target.h"
#include "model/model_weights.h"
#include "tensor/gguf_file.h"

namespace deferkv::cli {
namespace {

const std::vector<std::string> kBenchFormats = {"md", "json"};

struct BenchArgs {
  std::string model;
  std::vector<int64_t> prompt_sizes = {512};
  std::vector<int64_t> gen_sizes = {128};
  std::vector<int64_t> depths = {0};
  std::vector<int> threads;
  int repetitions = 5;
  int64_t n_batch = 512;
  ReportOutput output;
  CacheTypeLists cache_types;
};

struct Result {
  std::string test;
  int threads;
  int64_t depth;
  CacheTypeOptions cache_types;
  int64_t kv_bytes_per_entry;  // keys and values of one entry in one KV head (no position)
  std::vector<double> tokens_per_second;
  double mean() const;
  double stddev() const;
};

double Result::mean() const {
  double sum = 0;
  for (double v : tokens_per_second) sum += v;
  return sum / static_cast<double>(tokens_per_second.size());
}

double Result::stddev() const {
  if (tokens_per_second.size() < 2) return 0.0;
  const double m = mean();
  double sq = 0;
  for (double v : tokens_per_second) sq += (v - m) * (v - m);
  return std::sqrt(sq / static_cast<double>(tokens_per_second.size() - 1));
}

std::vector<int32_t> random_tokens(std::mt19937& rng, int64_t n, int64_t n_vocab) {
  std::uniform_int_distribution<int32_t> pick(0, static_cast<int32_t>(n_vocab - 1));
  std::vector<int32_t> tokens(static_cast<size_t>(n));
  for (auto& t : tokens) t = pick(rng);
  return tokens;
}

// Times `n` prompt tokens (pp) or `n` single-token decode steps (tg) after `depth`
// tokens of context, for every cache type pair; each context is filled once and each
// repetition rolls back to it. Repetitions alternate between the pairs.
std::vector<Result> measure(const std::shared_ptr<const Model>& model, int threads, int64_t depth, int64_t n,
                            bool prompt_test, const BenchArgs& args) {
  const auto pool = make_thread_pool(threads);
  const int64_t n_vocab = model->config().n_vocab;
  std::vector<std::unique_ptr<Session>> sessions;
  std::vector<Result> results;
  std::vector<int32_t> tokens;
  for (const CacheTypeOptions& types : args.cache_types.pairs()) {
    SessionOptions options;
    options.n_ctx = depth + n + 1;
    options.n_batch = args.n_batch;
    types.apply(options);
    sessions.push_back(std::make_unique<Session>(model, pool, options));
    std::mt19937 rng(42);  // the same context and tokens for every pair
    if (depth > 0) sessions.back()->prefill(random_tokens(rng, depth, n_vocab));
    tokens = random_tokens(rng, n, n_vocab);
    const KvStats kv = sessions.back()->kv_stats();
    results.push_back({fmt::format("{}{}{}", prompt_test ? "pp" : "tg", n, depth > 0 ? fmt::format(" @ d{}", depth) : ""),
                       threads, depth, types, kv.key_row_bytes + kv.value_row_bytes, {}});
  }
  for (int rep = -1; rep < args.repetitions; ++rep) {  // rep -1 is the warm-up
    for (size_t s = 0; s < sessions.size(); ++s) {
      Session& session = *sessions[s];
      session.truncate(depth);
      const auto start = std::chrono::steady_clock::now();
      if (prompt_test) {
        session.prefill(tokens);
      } else {
        for (int32_t t : tokens) session.decode(t);
      }
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (rep >= 0) results[s].tokens_per_second.push_back(static_cast<double>(n) / seconds);
    }
  }
  return results;
}

void run_bench(const BenchArgs& args) {
  validate_report_output(args.output, kBenchFormats);
  if (args.repetitions < 1) fail("-r must be at least 1");
  auto model = Model::load(args.model);
  const ModelConfig& c = model->config();
  std::vector<int> thread_counts = args.threads;
  if (thread_counts.empty()) thread_counts.push_back(ThreadPool::default_threads());

  std::vector<Result> results;
  for (int threads : thread_counts) {
    for (int64_t depth : args.depths) {
      for (int64_t n : args.prompt_sizes) {
        if (n > 0) {
          for (Result& r : measure(model, threads, depth, n, true, args)) results.push_back(std::move(r));
        }
      }
      for (int64_t n : args.gen_sizes) {
        if (n > 0) {
          for (Result& r : measure(model, threads, depth, n, false, args)) results.push_back(std::move(r));
        }
      }
    }
  }

  const std::string name = std::filesystem::path(args.model).filename().string();
  const double size_mib = static_cast<double>(model->gguf().file_size()) / (1024.0 * 1024.0);
  if (args.output.format == "json") {
    nlohmann::json out = nlohmann::json::array();
    const size_t huge_page_bytes = model->weights().copies.huge_page_bytes();  // reads smaps: once
    for (const Result& r : results) {
      out.push_back({{"model", name}, {"arch", c.arch_name}, {"model_size", model->gguf().file_size()},
                     {"n_threads", r.threads}, {"type_k", r.cache_types.keys}, {"type_v", r.cache_types.values},
                     {"kv_bytes_per_entry", r.kv_bytes_per_entry}, {"test", r.test}, {"depth", r.depth},
                     {"avg_ts", r.mean()}, {"stddev_ts", r.stddev()}, {"samples_ts", r.tokens_per_second},
                     {"simd_target", simd_target_name()},
                     {"kquant_activation", kquant_activation() == KQuantActivation::kInt8 ? "int8" : "int16"},
                     {"bf16_activation", gemm_int16_takes_bf16() ? "bf16" : "f32"},
                     {"weight_layout", weight_layout() == WeightLayout::kRowGroups ? "row-groups" : "gguf"},
                     {"weight_memory", weight_memory() == WeightMemory::kHugePages ? "huge-pages" : "map"},
                     {"weight_huge_page_bytes", huge_page_bytes}});
    }
    write_report(args.output, out.dump(2) + "\n");
    return;
  }
  std::string table =
      "| model | size | threads | type_k | type_v | KV B/entry/head | test | t/s |\n"
      "| --- | ---: | ---: | --- | --- | ---: | ---: | ---: |\n";
  for (const Result& r : results) {
    table += fmt::format("| {} {} | {:.2f} MiB | {} | {} | {} | {} | {} | {:.2f} ± {:.2f} |\n", name, c.arch_name,
                         size_mib, r.threads, r.cache_types.keys, r.cache_types.values, r.kv_bytes_per_entry, r.test,
                         r.mean(), r.stddev());
  }
  write_report(args.output, table);
}

}  // namespace

void add_bench_command(CLI::App& app) {
  auto args = std::make_shared<BenchArgs>();
  CLI::App* cmd = app.add_subcommand("bench", "Measure prompt and generation throughput (like llama-bench)");
  add_model_option(*cmd, args->model);
  cmd->add_option("-p,--n-prompt", args->prompt_sizes, "Prompt sizes to time (pp); 0 = none")
      ->delimiter(',')->capture_default_str();
  cmd->add_option("-n,--n-gen", args->gen_sizes, "Generation lengths to time (tg); 0 = none")
      ->delimiter(',')->capture_default_str();
  cmd->add_option("-d,--n-depth", args->depths, "Context depths to run each test at")
      ->delimiter(',')->capture_default_str();
  cmd->add_option("-t,--threads", args->threads, "Thread counts (default: the cores this process may use)")
      ->delimiter(',')
      ->check(CLI::Range(1, 1024));
  cmd->add_option("-r,--repetitions", args->repetitions, "Repetitions of each test")->capture_default_str();
  cmd->add_option("-b,--batch-size", args->n_batch, "Prompt tokens per forward pass")->capture_default_str();
  add_report_output_options(*cmd, args->output, kBenchFormats);
  add_cache_type_options(*cmd, args->cache_types);
  cmd->callback([args] { run_bench(*args); });
}

}  // namespace deferkv::cli
