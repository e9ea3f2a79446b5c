// `deferkv bench-batch`: aggregate decode throughput of the batch engine with N sequences at
// once: each gets a random prompt of -p tokens and generates -n tokens (greedy, full cache);
// the clock runs from the step where every sequence has its first token to the end, so it
// times the batched decode steps. A second clock runs from the first submit to the end
// (prefill included: all generated tokens over that time), the figure `bench-serve --task
// random` reports for the same prompts through the server. The -np counts alternate within each repetition, so a
// drift of the machine's speed falls on all of them alike.
#include <chrono>
#include <cmath>

#include <fmt/format.h>

#include "commands.h"
#include "common_options.h"
#include "deferkv/batch_engine.h"
#include "deferkv/embedding.h"
#include "deferkv/error.h"
#include "random_prompts.h"

namespace deferkv::cli {
namespace {

struct BenchBatchArgs {
  std::string model;
  std::vector<int64_t> parallel = {1, 8};
  int64_t n_prompt = 512;
  int64_t n_gen = 128;
  int threads = 1;
  int repetitions = 3;
};

struct Rates {
  double decode = 0;      // tokens per second of the decode steps with every sequence started
  double end_to_end = 0;  // all generated tokens per second from the first submit
};

Rates measure(const std::shared_ptr<const Model>& model, const std::shared_ptr<ThreadPool>& pool, int64_t n,
              const BenchBatchArgs& args) {
  BatchEngineOptions o;
  o.max_sequences = n;
  o.kv_capacity_bytes = int64_t{1} << 40;
  o.session.n_ctx = args.n_prompt + args.n_gen + 1;
  BatchEngine engine(model, pool, o);
  int64_t started = 0;  // sequences with their first token
  int64_t timed_tokens = 0;
  int64_t all_tokens = 0;
  std::chrono::steady_clock::time_point start;
  const auto submitted = std::chrono::steady_clock::now();
  for (auto& prompt : random_prompts(model->config().n_vocab, n, args.n_prompt)) {
    SequenceRequest r;
    r.prompt = std::move(prompt);
    r.max_tokens = args.n_gen;
    r.stop_at_end_of_generation = false;
    r.sampling.temperature = 0;
    SequenceCallbacks cb;
    cb.on_token = [&, first = true](int32_t) mutable {
      ++all_tokens;
      if (first) {
        first = false;
        if (++started == n) start = std::chrono::steady_clock::now();
        return true;
      }
      if (started == n) ++timed_tokens;
      return true;
    };
    engine.submit(std::move(r), std::move(cb));
  }
  while (engine.step()) {
  }
  const auto end = std::chrono::steady_clock::now();
  return {static_cast<double>(timed_tokens) / std::chrono::duration<double>(end - start).count(),
          static_cast<double>(all_tokens) / std::chrono::duration<double>(end - submitted).count()};
}

// "mean ± sd" of the repetitions.
std::string mean_and_sd(const std::vector<double>& values) {
  double mean = 0;
  for (double v : values) mean += v / static_cast<double>(values.size());
  double sq = 0;
  for (double v : values) sq += (v - mean) * (v - mean);
  const double sd = values.size() > 1 ? std::sqrt(sq / static_cast<double>(values.size() - 1)) : 0.0;
  return fmt::format("{:.2f} ± {:.2f}", mean, sd);
}

void run_bench_batch(const BenchBatchArgs& args) {
  if (args.repetitions < 1) fail("-r must be at least 1");
  if (args.n_prompt < 1 || args.n_gen < 2) fail("-p must be at least 1 and -n at least 2");
  auto model = Model::load(args.model);
  const auto pool = make_thread_pool(args.threads);
  std::vector<std::vector<double>> decode(args.parallel.size());
  std::vector<std::vector<double>> end_to_end(args.parallel.size());
  for (int rep = -1; rep < args.repetitions; ++rep) {  // rep -1 is the warm-up
    for (size_t i = 0; i < args.parallel.size(); ++i) {
      const Rates rates = measure(model, pool, args.parallel[i], args);
      if (rep < 0) continue;
      decode[i].push_back(rates.decode);
      end_to_end[i].push_back(rates.end_to_end);
    }
  }
  fmt::print("| sequences | prompt | generated | threads | decode t/s (aggregate) | end-to-end t/s (aggregate) |\n"
             "| ---: | ---: | ---: | ---: | ---: | ---: |\n");
  for (size_t i = 0; i < args.parallel.size(); ++i) {
    fmt::print("| {} | {} | {} | {} | {} | {} |\n", args.parallel[i], args.n_prompt, args.n_gen, args.threads,
               mean_and_sd(decode[i]), mean_and_sd(end_to_end[i]));
  }
}

}  // namespace

void add_bench_batch_command(CLI::App& app) {
  auto args = std::make_shared<BenchBatchArgs>();
  CLI::App* cmd = app.add_subcommand("bench-batch", "Measure the batch engine's aggregate decode throughput");
  add_model_option(*cmd, args->model);
  cmd->add_option("--np,--parallel", args->parallel, "Sequences at once, each count timed in turn")
      ->delimiter(',')->capture_default_str();
  cmd->add_option("-p,--n-prompt", args->n_prompt, "Prompt tokens of each sequence")->capture_default_str();
  cmd->add_option("-n,--n-gen", args->n_gen, "Tokens each sequence generates")->capture_default_str();
  add_threads_option(*cmd, args->threads);
  cmd->add_option("-r,--repetitions", args->repetitions, "Repetitions")->capture_default_str();
  cmd->callback([args] { run_bench_batch(*args); });
}

}  // namespace deferkv::cli
