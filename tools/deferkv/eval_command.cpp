// `deferkv eval`: the RULER, Needle-in-a-Haystack or LongBench sweep of the papers in one command,
//   deferkv eval -m model.gguf --bench ruler --lengths 4k,8k --press snapkv,deferkv --kv-budget 64,128
//   deferkv eval -m model.gguf --bench longbench --longbench-dir LongBench/data --press snapkv --kv-budget 128,256
// methods × budgets × tasks × lengths (× samples or depths), or × datasets × rows for
// LongBench, resumable, with reports and plots.
#include <sys/resource.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "base/sha256.h"
#include "commands.h"
#include "common_options.h"
#include "deferkv/chat_template.h"
#include "deferkv/error.h"
#include "deferkv/eval_longbench.h"
#include "deferkv/eval_metrics.h"
#include "deferkv/eval_sweep.h"
#include "deferkv/model.h"
#include "eval_lists.h"
#include "eval_sample_run.h"
#include "eval_server_run.h"
#include "model_card_coverage.h"

namespace deferkv::cli {
namespace {

struct EvalArgs {
  std::string model;
  std::string draft_model;  // for presses that draft
  std::string bench = "ruler";
  std::string tasks = "all";
  std::string lengths;
  std::string depths;
  std::string presses = "full";
  std::string budgets, ratios;
  int64_t samples = 0;  // 0: not given (RULER 500, LongBench all)
  uint64_t seed = 42;
  std::string word_split = "all";
  SamplerParams sampling;
  int threads = 1;
  int64_t n_batch = 512;
  std::string output = "results";
  std::string name;          // the results folder's name; "" derives it from the configuration
  std::string shard = "1/1";
  std::string chat_template;
  bool no_chat_template = false;
  std::string data_dir = eval::TaskOptions::default_data_dir();
  std::string squad, hotpotqa;
  std::string longbench_dir;
  int64_t max_length = 0;  // 0: the model's context minus the dataset's new tokens
  CacheTypeOptions cache_types;
  EvalServerArgs remote;  // --server: the samples run on OpenAI-compatible servers
};

constexpr int64_t kRulerDefaultSamples = 500;

// --tasks for LongBench: datasets by name (unknown: an error listing the 21), "all" the 16
// English ones.
std::vector<std::string> longbench_dataset_list(const EvalArgs& args) {
  std::vector<std::string> datasets;
  if (args.tasks == "all") {
    for (std::string_view d : eval::longbench_english_datasets()) datasets.emplace_back(d);
    return datasets;
  }
  datasets = split_names(args.tasks);
  for (const std::string& d : datasets) eval::longbench_metric(d);
  return datasets;
}

std::vector<std::string> ruler_task_list(const EvalArgs& args) {
  if (args.tasks != "all") {
    std::vector<std::string> tasks = split_names(args.tasks);
    for (const std::string& t : tasks) eval::ruler_tokens_to_generate(t);  // unknown: an error listing the 13
    return tasks;
  }
  std::vector<std::string> tasks;
  for (std::string_view t : eval::ruler_tasks()) {
    if ((t == "qa_1" && args.squad.empty()) || (t == "qa_2" && args.hotpotqa.empty())) {
      fmt::print(stderr, "note: {} left out: it needs {}\n", t, t == "qa_1" ? "--squad" : "--hotpotqa");
      continue;
    }
    tasks.emplace_back(t);
  }
  return tasks;
}

std::vector<eval::SweepMethod> sweep_methods(const EvalArgs& args) {
  std::vector<std::pair<KvBudget, std::string>> budgets;
  if (!args.budgets.empty()) {
    for (double b : parse_numbers(args.budgets, "--kv-budget")) {
      if (b < 1 || b != std::floor(b)) fail("--kv-budget: {} is not a positive whole number of entries", b);
      budgets.emplace_back(KvBudget::per_head(static_cast<int64_t>(b)), fmt::format("{}", b));
    }
  }
  if (!args.ratios.empty()) {
    for (double r : parse_numbers(args.ratios, "--kv-ratio")) budgets.emplace_back(KvBudget::ratio(r), fmt::format("r{}", r));
  }
  std::vector<eval::SweepMethod> methods;
  for (const std::string& press : split_press_specs(args.presses)) {
    if (press == "full") {
      methods.push_back({press, std::nullopt, ""});
      continue;
    }
    if (budgets.empty()) fail("--press {} needs --kv-budget or --kv-ratio", press);
    for (const auto& [budget, label] : budgets) methods.push_back({press, budget, label});
  }
  return methods;
}

// Everything a row's result depends on, and the sweep's grid under "sweep". A field added here
// is part of every row's identity (eval::row_context) without more ado.
nlohmann::ordered_json config_of(const EvalArgs& args, const eval::SweepPlan& plan, const std::string& chat,
                                 const nlohmann::ordered_json& max_lengths) {
  nlohmann::ordered_json c;
  c["benchmark"] = args.bench;
  c["model"] = {{"path", std::filesystem::absolute(args.model).string()}, {"sha256", sha256_file(args.model)}};
  if (!args.draft_model.empty()) {
    c["draft_model"] = {{"path", std::filesystem::absolute(args.draft_model).string()},
                        {"sha256", sha256_file(args.draft_model)}};
  }
  if (plan.benchmark == eval::Benchmark::kLongBench) {
    c["longbench_dir"] = std::filesystem::absolute(args.longbench_dir).string();
    // As given: the limits it resolves to per dataset follow from the model and the dataset.
    c["max_length"] = args.max_length > 0 ? nlohmann::ordered_json(args.max_length) : nlohmann::ordered_json("model context");
  }
  c["seed"] = args.seed;
  if (args.word_split != "all") c["word_split"] = args.word_split;
  c["decoding"] = args.sampling.temperature <= 0
                      ? nlohmann::ordered_json{{"temperature", 0}}
                      : nlohmann::ordered_json{{"temperature", args.sampling.temperature},
                                               {"top_k", args.sampling.top_k},
                                               {"top_p", args.sampling.top_p},
                                               {"min_p", args.sampling.min_p}};
  c["kv_cache"] = {{"type_k", args.cache_types.keys}, {"type_v", args.cache_types.values}};
  c["chat_template"] = chat.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(chat);
  // The prompt's tokens per forward pass pick the matmul route (matvec below a per-type count,
  // tiled GEMM above), whose sums round differently: greedy answers can change with it.
  c["n_batch"] = args.n_batch;
  c["threads"] = args.threads;
  if (args.data_dir != eval::TaskOptions::default_data_dir()) c["data_dir"] = args.data_dir;
  if (!args.squad.empty()) c["squad"] = std::filesystem::absolute(args.squad).string();
  if (!args.hotpotqa.empty()) c["hotpotqa"] = std::filesystem::absolute(args.hotpotqa).string();
  c["sweep"] = eval::sweep_config(plan);
  if (!max_lengths.is_null()) c["sweep"]["max_length"] = max_lengths;
  return c;
}

// The commit of the source tree deferkv was built from, "" when git cannot tell.
std::string git_commit() {
  FILE* pipe = ::popen("git -C '" DEFERKV_SOURCE_DIR "' rev-parse HEAD 2>/dev/null", "r");
  if (pipe == nullptr) return "";
  char buffer[64] = {};
  const size_t n = std::fread(buffer, 1, sizeof(buffer) - 1, pipe);
  ::pclose(pipe);
  std::string commit(buffer, n);
  while (!commit.empty() && (commit.back() == '\n' || commit.back() == '\r')) commit.pop_back();
  return commit;
}

int64_t peak_rss_bytes() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  return static_cast<int64_t>(usage.ru_maxrss) * 1024;  // Linux reports KiB
}

// Ctrl-C stops the sweep after the sample in flight (its line is written), then the reports
// of what is done are written and printed; a second Ctrl-C ends the process at once.
std::atomic<bool> interrupted{false};

struct Interrupted {};

extern "C" void on_interrupt(int) {
  interrupted = true;
  std::signal(SIGINT, SIG_DFL);
}

eval::SweepPlan plan_of(const EvalArgs& args) {
  eval::SweepPlan plan;
  plan.benchmark = eval::benchmark_from_name(args.bench);
  if (plan.benchmark == eval::Benchmark::kLongBench) {
    if (args.longbench_dir.empty()) fail("--bench longbench needs --longbench-dir, the folder of the <dataset>.jsonl files");
    if (!args.lengths.empty()) fail("--lengths is for ruler and niah; LongBench prompts are cut to --max-length");
    if (!args.depths.empty()) fail("--depths is for --bench niah");
    plan.tasks = longbench_dataset_list(args);
    plan.samples = args.samples > 0 ? args.samples : -1;
  } else {
    if (!args.longbench_dir.empty() || args.max_length > 0) fail("--longbench-dir and --max-length are for --bench longbench");
    if (args.lengths.empty()) fail("give the lengths to evaluate with --lengths, e.g. 4k,8k");
    plan.lengths = parse_lengths(args.lengths);
    if (plan.benchmark == eval::Benchmark::kNiah) {
      if (args.tasks != "all") fail("--tasks is for --bench ruler and longbench; NIAH has one task");
      plan.depths = args.depths.empty() ? eval::niah_default_depths() : parse_numbers(args.depths, "--depths");
    } else {
      if (!args.depths.empty()) fail("--depths is for --bench niah");
      plan.tasks = ruler_task_list(args);
      plan.samples = args.samples > 0 ? args.samples : kRulerDefaultSamples;
    }
  }
  plan.methods = sweep_methods(args);
  return plan;
}

nlohmann::ordered_json run_info(const nlohmann::ordered_json& more) {
  nlohmann::ordered_json run = {{"git_commit", git_commit()}};
  run.update(more);
  run["peak_rss_bytes"] = peak_rss_bytes();
  return run;
}

// `deferkv eval merge DIR… -o OUT`: a subcommand of eval (not an --merge flag) so that its
// help lists its two arguments only and its -o names the merged folder itself.
CLI::App* add_eval_merge_command(CLI::App& eval) {
  struct MergeArgs {
    std::vector<std::string> dirs;
    std::string output;
  };
  auto args = std::make_shared<MergeArgs>();
  CLI::App* cmd = eval.add_subcommand("merge", "Join the results folders of a sharded sweep (eval --shard i/N) into one, "
                                               "with the reports of a single run");
  cmd->add_option("dirs", args->dirs, "The shards' results folders (one when they share it)")->required();
  cmd->add_option("-o,--output", args->output, "The merged results folder (new)")->required();
  cmd->callback([args] {
    const eval::SweepPlan plan = eval::merge_results(args->dirs, args->output);
    const std::string tables = eval::write_reports(plan, args->output, run_info({{"merged_from", args->dirs}}));
    fmt::print("{}", tables);
    fmt::print(stderr, "merged {} folder(s); reports in {}/summary.md\n", args->dirs.size(), args->output);
  });
  return cmd;
}

void run_eval(const EvalArgs& args) {
  eval::SweepPlan plan = plan_of(args);
  const eval::Shard shard = eval::Shard::parse(args.shard);
  args.sampling.validate();
  const bool on_server = !args.remote.urls.empty();
  if (!on_server && args.remote.concurrency > 1) fail("--concurrency is for --server; a local run uses -t threads");
  if (on_server && !args.draft_model.empty()) fail("--draft-model is for local runs; a server drafts with its own");
  SamplerParams sampling = args.sampling;
  sampling.seed = args.seed;

  const auto model = Model::load(args.model);
  warn_if_card_does_not_cover(*model, plan.benchmark, stderr);
  const std::shared_ptr<const Model> draft = args.draft_model.empty() ? nullptr : Model::load(args.draft_model);
  // Asks the servers for their model: an unreachable one fails here, before any sample.
  const std::unique_ptr<EvalServerRunner> remote =
      on_server ? std::make_unique<EvalServerRunner>(args.remote, plan, model->tokenizer(), sampling) : nullptr;
  std::unique_ptr<eval::TaskGenerator> generator;
  std::unique_ptr<eval::LongBenchSet> longbench;
  // --api chat: the server applies its chat format to the plain prompt.
  const eval::PromptOptions prompt{!args.no_chat_template && !(remote && remote->chat()), args.chat_template};
  nlohmann::ordered_json max_lengths;  // LongBench: per dataset
  if (plan.benchmark == eval::Benchmark::kLongBench) {
    eval::LongBenchOptions options;
    options.data_dir = args.longbench_dir;
    options.datasets = plan.tasks;
    options.samples = plan.samples;
    options.max_length = args.max_length;
    options.prompt = prompt;
    longbench = std::make_unique<eval::LongBenchSet>(model->tokenizer(), model->config().n_ctx_train, options);
    for (const std::string& d : plan.tasks) {
      max_lengths[d] = longbench->max_length(d);
      plan.rows.push_back(longbench->rows(d));
    }
  } else {
    eval::TaskOptions task_options;
    task_options.data_dir = args.data_dir;
    task_options.squad_path = args.squad;
    task_options.hotpotqa_path = args.hotpotqa;
    task_options.prompt = prompt;
    task_options.seed = args.seed;
    task_options.word_split = eval::word_split_from_name(args.word_split);
    generator = std::make_unique<eval::TaskGenerator>(model->tokenizer(), task_options);
    for (int64_t length : plan.lengths) {
      if (length > model->config().n_ctx_train) {
        fmt::print(stderr, "warning: {} tokens is beyond the model's training context of {}\n", length,
                   model->config().n_ctx_train);
      }
    }
  }

  const std::string stem = fmt::format("{}-{}", args.bench, std::filesystem::path(args.model).stem().string());
  const std::string chat = longbench ? longbench->chat_template_name() : generator->chat_template_name();
  nlohmann::ordered_json config = config_of(args, plan, chat, max_lengths);
  if (remote) remote->describe_in(config);
  const std::string dir = eval::prepare_results_dir(args.output, args.name, stem, config);
  fmt::print(stderr, "results: {}{}\n", dir, shard.whole() ? "" : fmt::format(" (shard {}/{})", shard.index, shard.count));

  const std::unique_ptr<EvalSampleRunner> local =
      remote ? nullptr
             : std::make_unique<EvalSampleRunner>(model, draft, make_thread_pool(args.threads), sampling, args.n_batch,
                                                  args.cache_types);
  std::atomic<int64_t> ran{0};  // --concurrency runs rows on several threads
  const eval::SampleExecutor execute = [&](const eval::SweepMethod& method, const eval::TaskSample& sample) {
    if (interrupted) throw Interrupted{};
    eval::SampleRun run = remote ? (*remote)(method, sample) : (*local)(method, sample);
    ++ran;
    return run;
  };
  const int concurrency = on_server ? args.remote.concurrency : 1;
  const auto start = std::chrono::steady_clock::now();
  std::signal(SIGINT, on_interrupt);
  try {
    if (longbench) {
      eval::run_sweep(plan, *longbench, execute, dir, stderr, shard, concurrency);
    } else {
      eval::run_sweep(plan, *generator, execute, dir, stderr, shard, concurrency);
    }
  } catch (const Interrupted&) {
    fmt::print(stderr, "\ninterrupted: writing the reports of the {} samples done this run\n", ran.load());
  }
  std::signal(SIGINT, SIG_DFL);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!shard.whole()) {
    // The reports need every shard's rows: `eval merge` writes them.
    fmt::print(stderr, "shard {}/{}: {} samples run in {:.1f} s; once every shard is done: deferkv eval merge '{}' -o OUT\n",
               shard.index, shard.count, ran.load(), seconds, dir);
    if (interrupted) throw ExitCode{130};
    return;
  }
  nlohmann::ordered_json run = {{"samples_run", ran.load()}, {"seconds", seconds}};
  if (remote) {
    run["server"] = args.remote.urls;
    run["concurrency"] = concurrency;
  } else {
    run["threads"] = args.threads;
  }
  const std::string tables = eval::write_reports(plan, dir, run_info(run));
  fmt::print("{}", tables);
  fmt::print(stderr, "{} samples run in {:.1f} s; reports in {}/summary.md\n", ran.load(), seconds, dir);
  if (interrupted) throw ExitCode{130};
}

}  // namespace

void add_eval_command(CLI::App& app) {
  auto args = std::make_shared<EvalArgs>();
  args->sampling.temperature = 0;
  CLI::App* cmd =
      app.add_subcommand("eval", "Run the RULER, Needle-in-a-Haystack or LongBench sweep over presses and budgets");
  add_model_option(*cmd, args->model, default_eval_model_path(), "the embedded retrieval model, models/README.md");
  add_draft_model_option(*cmd, args->draft_model);
  cmd->add_option("--bench", args->bench, "ruler, niah or longbench")->capture_default_str();
  cmd->add_option("--tasks", args->tasks,
                  "RULER tasks or LongBench datasets, comma-separated (all: RULER's 13, qa_1/qa_2 only when "
                  "--squad/--hotpotqa are given; LongBench's 16 English datasets)")
      ->capture_default_str();
  cmd->add_option("--lengths", args->lengths, "Lengths in tokens: 4k,8k or start:end:step (1000:8000:1000)");
  cmd->add_option("--depths", args->depths, "NIAH needle depths in percent (default 0,11,22,…,100)");
  cmd->add_option("--press", args->presses, "Methods, comma-separated (';' when their parameters hold commas)")
      ->capture_default_str();
  auto* budget = cmd->add_option("--kv-budget", args->budgets, "Budgets: prompt KV entries kept per KV head, e.g. 64,128");
  auto* ratio = cmd->add_option("--kv-ratio", args->ratios, "Or compression ratios (share of the prompt evicted), e.g. 0.5,0.75");
  budget->excludes(ratio);
  cmd->add_option("--samples", args->samples,
                  fmt::format("Samples per task and length (RULER, default {}) or per dataset (LongBench, default all)",
                              kRulerDefaultSamples))
      ->check(CLI::PositiveNumber);
  cmd->add_option("-s,--seed", args->seed, "Seed of the task generators and of sampled decoding")->capture_default_str();
  cmd->add_option("--temp", args->sampling.temperature, "Temperature; 0 = greedy")->capture_default_str();
  cmd->add_option("--top-k", args->sampling.top_k, "Top-k for sampled decoding")->capture_default_str();
  cmd->add_option("--top-p", args->sampling.top_p, "Top-p for sampled decoding")->capture_default_str();
  cmd->add_option("--min-p", args->sampling.min_p, "Min-p for sampled decoding")->capture_default_str();
  add_threads_option(*cmd, args->threads);
  add_cache_type_options(*cmd, args->cache_types);
  cmd->add_option("-b,--batch-size", args->n_batch, "Prompt tokens per forward pass")->capture_default_str();
  cmd->add_option("-o,--output", args->output, "Folder the results folder is made in (with a 'latest' link to it)")
      ->capture_default_str();
  cmd->add_option("--name", args->name,
                  "The results folder's name (default <bench>-<model>-<hash of everything but the grid>; a grown "
                  "sweep goes to the same folder and reuses its rows)");
  cmd->add_option("--shard", args->shard,
                  "Run shard i of N (i/N) of the grid into the same folder, in its own samples file; then eval merge")
      ->capture_default_str();
  cmd->add_option("--chat-template", args->chat_template,
                  "Chat format instead of the model's: " + fmt::format("{}", fmt::join(ChatTemplate::known_names(), ", ")));
  cmd->add_flag("--no-chat-template", args->no_chat_template, "Plain prompts even if the model has a chat format");
  cmd->add_option("--data-dir", args->data_dir, "Folder with ruler/PaulGrahamEssays.json and ruler/wonderwords/")
      ->capture_default_str();
  cmd->add_option("--longbench-dir", args->longbench_dir, "Folder of LongBench's <dataset>.jsonl files (official schema)");
  cmd->add_option("--max-length", args->max_length,
                  "LongBench: prompt tokens kept by middle truncation (default: the model's context minus the "
                  "dataset's max new tokens)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--squad", args->squad, "SQuAD v2 dev JSON (dev-v2.0.json), for qa_1");
  cmd->add_option("--word-split", args->word_split,
                  "RULER needle keys from all word-list lines, the even ones (train) or the odd ones (heldout)")
      ->capture_default_str();
  cmd->add_option("--hotpotqa", args->hotpotqa, "HotpotQA dev distractor JSON (hotpot_dev_distractor_v1.json), for qa_2");
  add_eval_server_options(*cmd, args->remote);
  CLI::App* merge = add_eval_merge_command(*cmd);
  cmd->callback([args, merge] {
    if (merge->parsed()) return;  // `eval merge` ran instead
    if (args->no_chat_template && !args->chat_template.empty()) fail("--chat-template and --no-chat-template exclude each other");
    run_eval(*args);
  });
}

}  // namespace deferkv::cli
