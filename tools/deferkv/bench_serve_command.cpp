// `deferkv bench-serve`: a load generator for `deferkv serve` (or any OpenAI-compatible
// server with --server). It builds prompts of the evaluation's generators (a RULER task or
// the NIAH cell at --length tokens, seeded; or random token ids, the prompts bench-batch
// runs), sends them as token ids, streamed and greedy, from --clients concurrent clients,
// and reports requests/s, generated tokens/s, time to first token and latency
// percentiles, the KV bytes the requests held and how many ran at once (the server's
// /metrics, polled). Without --server it starts the server in this process, on 127.0.0.1
// and a free port, with the server's flags given here. --warmup requests go first, one at a
// time and untimed.
#include <cmath>
#include <memory>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "client/load_generator.h"
#include "client/load_summary.h"
#include "commands.h"
#include "common_options.h"
#include "deferkv/error.h"
#include "deferkv/eval_metrics.h"
#include "deferkv/eval_tasks.h"
#include "deferkv/model.h"
#include "deferkv/tokenizer.h"
#include "random_prompts.h"
#include "server/byte_size.h"
#include "server/http_server.h"

namespace deferkv::cli {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

const std::vector<std::string> kBenchServeFormats = {"md", "json"};

struct BenchServeArgs {
  std::string model;
  std::string server_url;  // "": start the server here
  int clients = 8;
  int64_t requests = 32;
  std::string task = "niah";
  int64_t length = 1024;
  int64_t samples = 8;
  int64_t warmup = 1;
  uint64_t seed = 42;
  int64_t max_tokens = 0;  // 0: the task's own
  bool ignore_eos = false;
  PressOptions press;
  double timeout_seconds = 600;
  double poll_ms = 20;
  // The server started here.
  int slots = 0;  // 0: --clients
  std::string kv_memory = "2GiB";
  int threads = 2;
  int64_t n_ctx = 0;
  ReportOutput output;
};

struct Prompt {
  std::vector<int32_t> tokens;
  int64_t max_tokens = 0;  // the task's own
};

// --samples distinct prompts: NIAH cells at the default depths in turn, RULER samples 0, 1,
// …, or random ids.
std::vector<Prompt> make_prompts(const BenchServeArgs& args, const Tokenizer& tokenizer) {
  std::vector<Prompt> prompts;
  if (args.task == "random") {
    for (auto& ids : random_prompts(tokenizer.n_vocab(), args.samples, args.length, static_cast<uint32_t>(args.seed))) {
      prompts.push_back({std::move(ids), 128});
    }
    return prompts;
  }
  eval::TaskOptions options;
  options.seed = args.seed;
  const eval::TaskGenerator generator(tokenizer, options);
  const std::vector<double> depths = eval::niah_default_depths();
  for (int64_t i = 0; i < args.samples; ++i) {
    const eval::TaskSample s = args.task == "niah"
                                   ? generator.niah(args.length, depths[static_cast<size_t>(i) % depths.size()])
                                   : generator.ruler(args.task, args.length, i);
    prompts.push_back({s.tokens, s.max_new_tokens});
  }
  return prompts;
}

// `deferkv_server`: the server is deferkv serve, which is always told the press (the full
// cache too: its own --press default would apply otherwise); another server gets no
// press field (it runs the full cache only).
std::vector<json> request_bodies(const BenchServeArgs& args, const std::vector<Prompt>& prompts, bool deferkv_server) {
  std::vector<json> bodies;
  for (int64_t i = 0; i < args.requests; ++i) {
    const Prompt& p = prompts[static_cast<size_t>(i % static_cast<int64_t>(prompts.size()))];
    json body = {{"prompt", p.tokens},
                 {"max_tokens", args.max_tokens > 0 ? args.max_tokens : p.max_tokens},
                 {"temperature", 0},
                 {"stream", true}};
    if (args.ignore_eos) body["ignore_eos"] = true;
    if (deferkv_server) {
      body["kv_press"] = args.press.spec;
      if (args.press.budget != PressOptions::kNoBudget) body["kv_budget"] = args.press.budget;
      if (args.press.ratio >= 0) body["kv_ratio"] = args.press.ratio;
    }
    bodies.push_back(std::move(body));
  }
  return bodies;
}

void check_args(const BenchServeArgs& args) {
  validate_report_output(args.output, kBenchServeFormats);
  if (args.clients < 1) fail("--clients must be at least 1, got {}", args.clients);
  if (args.requests < 1) fail("--requests must be at least 1, got {}", args.requests);
  if (args.warmup < 0) fail("--warmup must be 0 or more, got {}", args.warmup);
  if (args.samples < 1) fail("--samples must be at least 1, got {}", args.samples);
  if (args.length < 1) fail("--length must be at least 1, got {}", args.length);
  if (args.timeout_seconds <= 0) fail("--timeout must be positive, got {}", args.timeout_seconds);
  if (!std::isfinite(args.poll_ms) || args.poll_ms < 0) fail("--poll-ms must be 0 (off) or positive, got {}", args.poll_ms);
  if (args.task != "niah" && args.task != "random") {
    const auto tasks = eval::ruler_tasks();
    if (std::find(tasks.begin(), tasks.end(), args.task) == tasks.end()) {
      fail("--task must be niah, random or a RULER task ({}), got '{}'", fmt::join(tasks, ", "), args.task);
    }
  }
  make_press_from(args.press);  // a bad --press or budget, before anything starts
  server::parse_byte_size(args.kv_memory);
  if (!args.server_url.empty()) client::OpenAiClient({.url = args.server_url});  // a bad URL, too
}

std::string seconds_row(const char* name, const client::Percentiles& p) {
  return fmt::format("| {} p50 / p90 / p99 / max s | {:.3f} / {:.3f} / {:.3f} / {:.3f} |\n", name, p.p50, p.p90, p.p99,
                     p.max);
}

std::string markdown_report(const BenchServeArgs& args, const client::LoadSummary& s, const std::string& target) {
  std::string out = fmt::format("bench-serve: {} × {} at {} tokens, press {}, {} clients, {} requests, server {}\n\n",
                                args.task, args.samples, args.length, args.press.spec, args.clients, args.requests, target);
  out += "| measure | value |\n| --- | ---: |\n";
  out += fmt::format("| requests ok / failed | {} / {} |\n", s.succeeded, s.failed);
  out += fmt::format("| wall s | {:.3f} |\n", s.wall_seconds);
  out += fmt::format("| requests/s | {:.3f} |\n", s.requests_per_second);
  out += fmt::format("| prompt tokens / generated tokens | {} / {} |\n", s.prompt_tokens, s.generated_tokens);
  out += fmt::format("| generated tok/s (aggregate) | {:.2f} |\n", s.generated_tokens_per_second);
  out += seconds_row("TTFT", s.ttft_seconds);
  out += seconds_row("latency", s.latency_seconds);
  out += fmt::format("| KV peak of one request MiB (usage) | {:.2f} |\n", static_cast<double>(s.max_request_kv_peak_bytes) / (1 << 20));
  if (s.server.available) {
    out += fmt::format("| KV used, peak of all MiB (/metrics) | {:.2f} of {:.2f} |\n",
                       static_cast<double>(s.server.max_kv_bytes_used) / (1 << 20),
                       static_cast<double>(s.server.kv_bytes_capacity) / (1 << 20));
    out += fmt::format("| requests running at once, max (/metrics) | {} |\n", s.server.max_running);
    out += fmt::format("| requests waiting, max (/metrics) | {} |\n", s.server.max_waiting);
  } else {
    out += "| /metrics | not available |\n";
  }
  for (const std::string& e : s.errors) out += fmt::format("\nerror: {}", e);
  return out + (s.errors.empty() ? "" : "\n");
}

ordered_json percentiles_json(const client::Percentiles& p) {
  return {{"p50", p.p50}, {"p90", p.p90}, {"p99", p.p99}, {"mean", p.mean}, {"max", p.max}};
}

std::string json_report(const BenchServeArgs& args, const client::LoadSummary& s, const std::string& target) {
  ordered_json server = {{"available", s.server.available}};
  if (s.server.available) {
    server["max_running"] = s.server.max_running;
    server["max_waiting"] = s.server.max_waiting;
    server["max_kv_bytes_used"] = s.server.max_kv_bytes_used;
    server["kv_bytes_capacity"] = s.server.kv_bytes_capacity;
    server["polls"] = s.server.polls;
  }
  const ordered_json out = {
      {"config",
       {{"server", target}, {"task", args.task}, {"length", args.length}, {"samples", args.samples},
        {"seed", args.seed}, {"warmup", args.warmup}, {"clients", args.clients}, {"requests", args.requests}, {"max_tokens", args.max_tokens},
        {"ignore_eos", args.ignore_eos}, {"press", args.press.spec}, {"kv_budget", args.press.budget},
        {"kv_ratio", args.press.ratio}}},
      {"requests", s.requests},
      {"succeeded", s.succeeded},
      {"failed", s.failed},
      {"wall_seconds", s.wall_seconds},
      {"requests_per_second", s.requests_per_second},
      {"prompt_tokens", s.prompt_tokens},
      {"generated_tokens", s.generated_tokens},
      {"generated_tokens_per_second", s.generated_tokens_per_second},
      {"ttft_seconds", percentiles_json(s.ttft_seconds)},
      {"latency_seconds", percentiles_json(s.latency_seconds)},
      {"max_request_kv_peak_bytes", s.max_request_kv_peak_bytes},
      {"server_metrics", server},
      {"errors", s.errors}};
  // NaN (no request succeeded) is written as null.
  return out.dump(2, ' ', false, ordered_json::error_handler_t::replace) + "\n";
}

void run_bench_serve(const BenchServeArgs& args) {
  check_args(args);
  const auto model = Model::load(args.model);  // the tokenizer that sizes the prompts
  const std::vector<Prompt> prompts = make_prompts(args, model->tokenizer());

  std::unique_ptr<server::HttpServer> local;
  std::string url = args.server_url;
  if (url.empty()) {
    server::ServerOptions o;
    o.model_path = args.model;
    o.port = 0;
    o.n_slots = args.slots > 0 ? args.slots : args.clients;
    o.kv_memory_bytes = server::parse_byte_size(args.kv_memory);
    o.threads = args.threads;
    o.n_ctx = args.n_ctx;
    o.max_queue = args.clients;  // each client waits on one request: none is ever refused
    local = std::make_unique<server::HttpServer>(o);
    local->start();
    url = fmt::format("http://127.0.0.1:{}", local->port());
  }
  client::ClientOptions co;
  co.url = url;
  co.timeout_seconds = args.timeout_seconds;
  co.retries = 0;
  const client::OpenAiClient client(co);
  const client::ServedModel served = client.served_model();
  const bool deferkv_server = served.owned_by == "deferkv";
  if (!deferkv_server && args.press.spec != "full") {
    fail("--server: {} is not deferkv serve (its model is owned by '{}'), so it cannot run --press {}", url,
         served.owned_by, args.press.spec);
  }
  const std::vector<json> bodies = request_bodies(args, prompts, deferkv_server);
  // The warm-up: the weights paged in and the kernels' buffers grown before the clock runs.
  for (int64_t i = 0; i < args.warmup; ++i) {
    const json& body = bodies[static_cast<size_t>(i) % bodies.size()];
    const client::StreamedAnswer a = client.stream(body, false);
    if (!a.error.empty()) fail("{}: the warm-up request failed: {}", url, a.error);
    if (deferkv_server) {
      if (const std::string m = client::press_mismatch(body, a.usage); !m.empty()) fail("{}: {}", url, m);
    }
  }
  client::LoadOptions lo;
  lo.clients = args.clients;
  lo.metrics_poll_seconds = args.poll_ms / 1000;
  lo.check_press = deferkv_server;  // no row under a press the server did not run
  const client::LoadSummary summary = client::summarize(client::run_load(client, bodies, lo));
  if (local) local->stop();
  const std::string target = args.server_url.empty() ? "in-process" : args.server_url;
  write_report(args.output, args.output.format == "json" ? json_report(args, summary, target)
                                                         : markdown_report(args, summary, target));
  if (summary.failed > 0) fail("{} of {} requests failed", summary.failed, summary.requests);
}

}  // namespace

void add_bench_serve_command(CLI::App& app) {
  auto args = std::make_shared<BenchServeArgs>();
  CLI::App* cmd = app.add_subcommand("bench-serve", "Load-test deferkv serve with concurrent streaming clients");
  add_model_option(*cmd, args->model);
  cmd->add_option("--server", args->server_url,
                  "A running OpenAI-compatible server's URL (default: start deferkv serve here on 127.0.0.1)");
  cmd->add_option("--clients", args->clients, "Clients sending at once, each one request at a time")->capture_default_str();
  cmd->add_option("--requests", args->requests, "Requests in all")->capture_default_str();
  cmd->add_option("--task", args->task, "Prompts: niah, a RULER task (niah_single_1, …) or random (token ids)")
      ->capture_default_str();
  cmd->add_option("--length", args->length, "Prompt length in tokens (RULER: prompt plus the task's answer)")
      ->capture_default_str();
  cmd->add_option("--samples", args->samples, "Distinct prompts, sent in turn")->capture_default_str();
  cmd->add_option("--warmup", args->warmup, "Requests sent one at a time before the timed run (not counted)")
      ->capture_default_str();
  cmd->add_option("--seed", args->seed, "Seed of the prompts")->capture_default_str();
  cmd->add_option("-n,--max-tokens", args->max_tokens, "Tokens each request generates at most (default: the task's; random: 128)");
  cmd->add_flag("--ignore-eos", args->ignore_eos, "Generate max-tokens tokens past the end of generation (fixed work)");
  add_press_options(*cmd, args->press);
  cmd->add_option("--timeout", args->timeout_seconds, "Seconds a request may take")->capture_default_str();
  cmd->add_option("--poll-ms", args->poll_ms, "How often /metrics is read, in ms (0: never)")->capture_default_str();
  cmd->add_option("--parallel", args->slots, "The started server's slots (default: --clients; also -np)");
  cmd->add_option("--kv-memory", args->kv_memory, "The started server's KV-cache memory (bytes, or with KiB/MiB/GiB)")
      ->capture_default_str();
  add_threads_option(*cmd, args->threads);
  cmd->add_option("-c,--ctx-size", args->n_ctx, "The started server's context size (default: model's, at most 4096)");
  add_report_output_options(*cmd, args->output, kBenchServeFormats);
  cmd->callback([args] { run_bench_serve(*args); });
}

}  // namespace deferkv::cli
