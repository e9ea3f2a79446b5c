#pragma once
// `deferkv eval --server URL`: the sweep's samples, as sized with the local tokenizer of -m,
// sent to OpenAI-compatible servers instead of run here; what comes back is scored and
// reported as a local run's rows are. With deferkv serve, each request carries the row's
// press and budget (kv_press, kv_budget / kv_ratio); other servers run the full-cache rows.
#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "client/openai_client.h"
#include "deferkv/eval_run.h"
#include "deferkv/eval_sweep.h"
#include "deferkv/sampler.h"
#include "deferkv/tokenizer.h"

namespace deferkv::cli {

struct EvalServerArgs {
  std::string urls;  // comma-separated; "" runs the sweep here
  int concurrency = 1;
  std::string api = "completions";
  double timeout_seconds = 600;
  int retries = 2;
};
void add_eval_server_options(CLI::App& cmd, EvalServerArgs& args);

// The environment variables the API key is read from, the first set one winning.
inline constexpr const char* kApiKeyVariables[] = {"DEFERKV_API_KEY", "OPENAI_API_KEY"};

class EvalServerRunner : public eval::RemoteSampleRunner {
 public:
  // Asks each server for its model (GET /v1/models): an unreachable one, replicas serving
  // different models, or a press row for a server that is not deferkv serve is an error
  // naming the URL, before any row runs. sampling.seed is the run's seed.
  // `tokenizer`: -m's, which sized the prompts.
  EvalServerRunner(const EvalServerArgs& args, const eval::SweepPlan& plan, const Tokenizer& tokenizer,
                   SamplerParams sampling);

  // --api chat: the prompts go as one user message, in the server's chat format.
  bool chat() const override { return chat_; }

  // Puts the servers' side in the results folder's config (the API and the model they
  // serve, part of every row's identity) in place of what only a local run has (threads,
  // batch size, cache types).
  void describe_in(nlohmann::ordered_json& config) const override;
  // The servers' URLs and --concurrency.
  nlohmann::ordered_json run_fields() const override;
  int concurrency() const override { return concurrency_; }

  // One row: its request, to the servers in turn. Thread-safe. An error names the URL and
  // the row.
  eval::SampleRun operator()(const eval::SweepMethod& method, const eval::TaskSample& sample) const override;

 private:
  // `deferkv_server`: the server is deferkv serve, told every row's press (see the .cpp).
  nlohmann::json request_of(const eval::SweepMethod& method, const eval::TaskSample& sample, bool deferkv_server) const;

  std::vector<std::string> urls_;
  int concurrency_;
  std::vector<client::OpenAiClient> clients_;
  std::vector<bool> deferkv_servers_;  // each client's server is deferkv serve
  client::ServedModel model_;
  eval::Benchmark benchmark_;  // for naming rows in errors
  bool chat_;
  bool drop_leading_space_;  // the tokenizer adds a space prefix
  SamplerParams sampling_;
  mutable std::atomic<size_t> next_client_{0};
};

}  // namespace deferkv::cli
