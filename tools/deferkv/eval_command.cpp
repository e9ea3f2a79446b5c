// `deferkv eval`: the RULER, Needle-in-a-Haystack or LongBench sweep of the papers in one command,
//   deferkv eval -m model.gguf --bench ruler --lengths 4k,8k --press snapkv,deferkv --kv-budget 64,128
//   deferkv eval -m model.gguf --bench longbench --longbench-dir LongBench/data --press snapkv --kv-budget 128,256
//   deferkv eval -m model.gguf --protocol kvpress   (kvpress's leaderboard: eval_protocol.h)
// methods × budgets × tasks × lengths (× samples or depths), or × datasets × rows for
// LongBench, resumable, with reports and plots. The flags fill an eval::EvalRequest; the
// library runs it (deferkv/eval_run.h, as deferkv.eval.run does from Python).
#include <atomic>
#include <csignal>
#include <cstdio>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "commands.h"
#include "common_options.h"
#include "deferkv/chat_template.h"
#include "deferkv/error.h"
#include "deferkv/eval_protocol.h"
#include "deferkv/eval_run.h"
#include "deferkv/eval_sweep.h"
#include "eval_lists.h"
#include "eval_server_run.h"

namespace deferkv::cli {
namespace {

// The flags as given; request_of parses their lists.
struct EvalArgs {
  eval::EvalRequest request;
  std::string tasks = "all";
  std::string lengths, depths;
  std::string presses = "full";
  std::string budgets, ratios;
  CacheTypeOptions cache_types;
  bool no_chat_template = false;
  std::string protocol;  // --protocol NAME: a preset grid (eval_protocol.h); "" the flags' own
  EvalServerArgs remote;  // --server: the samples run on OpenAI-compatible servers
};

eval::EvalRequest request_of(const EvalArgs& args) {
  eval::EvalRequest r = args.request;
  if (args.tasks != "all") r.tasks = split_names(args.tasks);
  if (!args.lengths.empty()) r.lengths = parse_lengths(args.lengths);
  if (!args.depths.empty()) r.depths = parse_numbers(args.depths, "--depths");
  r.presses = split_press_specs(args.presses);
  r.budgets = parse_budget_entries(args.budgets);
  if (!args.ratios.empty()) r.ratios = parse_numbers(args.ratios, "--kv-ratio");
  r.cache_type_k = args.cache_types.keys;
  r.cache_type_v = args.cache_types.values;
  r.chat = !args.no_chat_template;
  return r;
}

// Ctrl-C stops the sweep after the sample in flight (its line is written), then the reports
// of what is done are written and printed; a second Ctrl-C ends the process at once.
std::atomic<bool> interrupted{false};

extern "C" void on_interrupt(int) {
  interrupted = true;
  std::signal(SIGINT, SIG_DFL);
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
    const std::string tables = eval::write_reports(plan, args->output, eval::run_record({{"merged_from", args->dirs}}));
    fmt::print("{}", tables);
    fmt::print(stderr, "merged {} folder(s); reports in {}/summary.md\n", args->dirs.size(), args->output);
  });
  return cmd;
}

eval::RemoteRunnerFactory remote_runner_factory(const EvalArgs& args) {
  if (!args.remote.urls.empty()) {
    return [&args](const eval::SweepPlan& plan, const Tokenizer& tokenizer, const SamplerParams& sampling) {
      return std::make_unique<EvalServerRunner>(args.remote, plan, tokenizer, sampling);
    };
  }
  if (args.remote.concurrency > 1) fail("--concurrency is for --server; a local run uses -t threads");
  return {};
}

// `eval --protocol kvpress`: the two sweeps of kvpress's leaderboard and its table and plot.
void run_protocol_command(const EvalArgs& args) {
  eval::eval_protocol_from_name(args.protocol);  // one protocol so far: kvpress
  const eval::EvalRequest request = request_of(args);
  const eval::RemoteRunnerFactory remote = remote_runner_factory(args);
  std::signal(SIGINT, on_interrupt);
  const eval::ProtocolOutcome outcome =
      eval::run_kvpress_protocol(request, stderr, [] { return interrupted.load(); }, remote);
  std::signal(SIGINT, SIG_DFL);
  if (outcome.interrupted) fmt::print(stderr, "\ninterrupted: the leaderboard holds the rows done so far\n");
  if (outcome.whole) {
    fmt::print("{}", outcome.table);
    fmt::print(stderr, "{} samples run; leaderboard in {}/leaderboard.md\n", outcome.samples_run, outcome.dir);
  } else {
    fmt::print(stderr, "{} samples run in this shard; once every shard is done, the same command without --shard "
               "writes the leaderboard (it runs no row again)\n", outcome.samples_run);
  }
  if (outcome.interrupted) throw ExitCode{130};
  if (outcome.failed_rows > 0) {
    fmt::print(stderr, "error: {} row(s) failed (their errors are in the sweeps' failures*.jsonl under {}); running "
               "the command again retries them\n", outcome.failed_rows, outcome.dir);
    throw ExitCode{1};
  }
}

void run_eval_command(const EvalArgs& args) {
  const eval::EvalRequest request = request_of(args);
  const eval::Shard shard = eval::Shard::parse(request.shard);
  const eval::RemoteRunnerFactory remote = remote_runner_factory(args);
  std::signal(SIGINT, on_interrupt);
  const eval::EvalOutcome outcome = eval::run_eval(request, stderr, [] { return interrupted.load(); }, remote);
  std::signal(SIGINT, SIG_DFL);
  if (outcome.interrupted) {
    fmt::print(stderr, "\ninterrupted: {} the {} samples done this run\n",
               shard.whole() ? "writing the reports of" : "kept", outcome.samples_run);
  }
  if (!shard.whole()) {
    fmt::print(stderr, "shard {}/{}: {} samples run in {:.1f} s; once every shard is done: deferkv eval merge '{}' -o OUT\n",
               shard.index, shard.count, outcome.samples_run, outcome.seconds, outcome.dir);
  } else {
    fmt::print("{}", outcome.tables);
    fmt::print(stderr, "{} samples run in {:.1f} s; reports in {}/summary.md\n", outcome.samples_run, outcome.seconds,
               outcome.dir);
  }
  if (outcome.interrupted) throw ExitCode{130};
  // Exit status 1 once everything is written when some rows failed (a script must not take a
  // partial sweep for a whole one); rerunning the command retries them.
  if (outcome.failed_rows > 0) {
    fmt::print(stderr, "error: {} row(s) failed (their errors are in {}/failures*.jsonl); the other rows are done; "
               "running the command again retries the failed ones\n", outcome.failed_rows, outcome.dir);
    throw ExitCode{1};
  }
}

}  // namespace

void add_eval_command(CLI::App& app) {
  auto args = std::make_shared<EvalArgs>();
  CLI::App* cmd =
      app.add_subcommand("eval", "Run the RULER, Needle-in-a-Haystack or LongBench sweep over presses and budgets");
  add_model_option(*cmd, args->request.model, default_eval_model_path(), "the embedded retrieval model, models/README.md");
  add_draft_model_option(*cmd, args->request.draft_model);
  cmd->add_option("--bench", args->request.bench, "ruler, niah or longbench")->capture_default_str();
  cmd->add_option("--tasks", args->tasks,
                  "RULER tasks or LongBench datasets, comma-separated (all: RULER's 13, qa_1/qa_2 only when "
                  "--squad/--hotpotqa are given; LongBench's 16 English datasets)")
      ->capture_default_str();
  cmd->add_option("--lengths", args->lengths, "Lengths in tokens: 4k,8k or start:end:step (1000:8000:1000)");
  cmd->add_option("--depths", args->depths, "NIAH needle depths in percent (default 0,11,22,…,100)");
  cmd->add_option("--protocol", args->protocol,
                  "A named protocol, run as a whole: kvpress (its leaderboard: RULER at 4K, ratios 0.25-0.875, every "
                  "press question-agnostic and kvpress's few also question-aware; writes leaderboard.md and .svg; "
                  "--press, --kv-ratio, --samples, --tasks restrict it; docs/evaluation.md)");
  cmd->add_option("--press", args->presses, "Methods, comma-separated (';' when their parameters hold commas)")
      ->capture_default_str();
  auto* budget = cmd->add_option("--kv-budget", args->budgets, "Budgets: prompt KV entries kept per KV head, e.g. 64,128");
  auto* ratio = cmd->add_option("--kv-ratio", args->ratios, "Or compression ratios (share of the prompt evicted), e.g. 0.5,0.75");
  budget->excludes(ratio);
  cmd->add_option("--samples", args->request.samples,
                  "Samples per task and length (RULER, default 500; --protocol kvpress: as many as fit 1600 rows) or "
                  "per dataset (LongBench, default all)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("-s,--seed", args->request.seed, "Seed of the task generators and of sampled decoding")->capture_default_str();
  cmd->add_option("--temp", args->request.sampling.temperature, "Temperature; 0 = greedy")->capture_default_str();
  cmd->add_option("--top-k", args->request.sampling.top_k, "Top-k for sampled decoding")->capture_default_str();
  cmd->add_option("--top-p", args->request.sampling.top_p, "Top-p for sampled decoding")->capture_default_str();
  cmd->add_option("--min-p", args->request.sampling.min_p, "Min-p for sampled decoding")->capture_default_str();
  add_threads_option(*cmd, args->request.threads);
  add_cache_type_options(*cmd, args->cache_types);
  add_question_agnostic_option(*cmd, args->request.question_agnostic,
                               "each prompt is split where the template's context ends, docs/evaluation.md");
  cmd->add_option("--questions-per-context", args->request.questions_per_context,
                  "Q questions over each sample's one haystack, its context compressed once and each question "
                  "answered from it (shared contexts; RULER's multi-key, multi-value, multi-query, vt and QA tasks; "
                  "docs/evaluation.md)")
      ->capture_default_str();
  cmd->add_option("--context-mode", args->request.context_mode,
                  "With --questions-per-context above 1: independent (each question alone after the context) or "
                  "multi-turn (each turn also reads the earlier questions and answers)")
      ->capture_default_str();
  cmd->add_option("-b,--batch-size", args->request.n_batch, "Prompt tokens per forward pass")->capture_default_str();
  cmd->add_option("-o,--output", args->request.output, "Folder the results folder is made in (with a 'latest' link to it)")
      ->capture_default_str();
  cmd->add_option("--name", args->request.name,
                  "The results folder's name (default <bench>-<model>-<hash of everything but the grid>; a grown "
                  "sweep goes to the same folder and reuses its rows)");
  cmd->add_option("--shard", args->request.shard,
                  "Run shard i of N (i/N) of the grid into the same folder, in its own samples file; then eval merge")
      ->capture_default_str();
  cmd->add_option("--chat-template", args->request.chat_template,
                  "Chat format instead of the model's: " + fmt::format("{}", fmt::join(ChatTemplate::known_names(), ", ")));
  cmd->add_flag("--no-chat-template", args->no_chat_template, "Plain prompts even if the model has a chat format");
  cmd->add_option("--data-dir", args->request.data_dir, "Folder with ruler/PaulGrahamEssays.json and ruler/wonderwords/")
      ->capture_default_str();
  cmd->add_option("--longbench-dir", args->request.longbench_dir, "Folder of LongBench's <dataset>.jsonl files (official schema)");
  cmd->add_option("--max-length", args->request.max_length,
                  "LongBench: prompt tokens kept by middle truncation (default: the model's context minus the "
                  "dataset's max new tokens)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--squad", args->request.squad, "SQuAD v2 dev JSON (dev-v2.0.json), for qa_1");
  cmd->add_option("--word-split", args->request.word_split,
                  "RULER needle keys from all word-list lines, the even ones (train) or the odd ones (heldout)")
      ->capture_default_str();
  cmd->add_option("--hotpotqa", args->request.hotpotqa, "HotpotQA dev distractor JSON (hotpot_dev_distractor_v1.json), for qa_2");
  add_eval_server_options(*cmd, args->remote);
  CLI::App* merge = add_eval_merge_command(*cmd);
  cmd->callback([args, merge] {
    if (merge->parsed()) return;  // `eval merge` ran instead
    if (!args->protocol.empty()) {
      run_protocol_command(*args);
    } else {
      run_eval_command(*args);
    }
  });
}

}  // namespace deferkv::cli
