// run_eval: a request checked and turned into a sweep plan and a results folder, the
// samples run on the model, the reports written (deferkv eval, deferkv.eval.run).
#include "deferkv/eval_run.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <filesystem>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "base/memory_stats.h"
#include "base/sha256.h"
#include "base/thread_pool.h"
#include "deferkv/embedding.h"
#include "deferkv/error.h"
#include "deferkv/eval_longbench.h"
#include "deferkv/eval_metrics.h"
#include "deferkv/eval_sweep.h"
#include "deferkv/generate.h"
#include "deferkv/model.h"
#include "eval/reports/kept_maps.h"
#include "eval/run/model_card_coverage.h"
#include "eval/run/sample_runner.h"

namespace deferkv::eval {
namespace {

constexpr int64_t kRulerDefaultSamples = 500;

// LongBench datasets by name (unknown: an error listing the 21); none: the 16 English ones.
std::vector<std::string> longbench_dataset_list(const EvalRequest& r) {
  if (!r.tasks.empty()) {
    for (const std::string& d : r.tasks) longbench_metric(d);
    return r.tasks;
  }
  std::vector<std::string> datasets;
  for (std::string_view d : longbench_english_datasets()) datasets.emplace_back(d);
  return datasets;
}

std::vector<std::string> ruler_task_list(const EvalRequest& r, std::FILE* progress) {
  if (!r.tasks.empty()) {
    for (const std::string& t : r.tasks) ruler_tokens_to_generate(t);  // unknown: an error listing the 13
    return r.tasks;
  }
  std::vector<std::string> tasks;
  for (std::string_view t : ruler_tasks()) {
    if ((t == "qa_1" && r.squad.empty()) || (t == "qa_2" && r.hotpotqa.empty())) {
      if (progress != nullptr) {
        fmt::print(progress, "note: {} left out: it needs {}\n", t, t == "qa_1" ? "--squad" : "--hotpotqa");
      }
      continue;
    }
    tasks.emplace_back(t);
  }
  return tasks;
}

std::vector<SweepMethod> sweep_methods(const EvalRequest& r) {
  if (!r.budgets.empty() && !r.ratios.empty()) fail("give KV budgets or KV ratios, not both");
  const std::vector<std::pair<KvBudget, std::string>> budgets = labelled_budgets(r.budgets, r.ratios);
  if (r.presses.empty()) fail("no press to evaluate: give at least one (\"full\" keeps the whole cache)");
  std::vector<SweepMethod> methods;
  for (const std::string& press : r.presses) {
    if (press == "full") {
      methods.push_back({press, std::nullopt, ""});
      continue;
    }
    if (budgets.empty()) fail("--press {} needs --kv-budget or --kv-ratio", press);
    for (const auto& [budget, label] : budgets) methods.push_back({press, budget, label});
  }
  check_presses_can_run(methods);
  return methods;
}

SweepPlan plan_of(const EvalRequest& r, std::FILE* progress) {
  SweepPlan plan;
  plan.benchmark = benchmark_from_name(r.bench);
  if (plan.benchmark == Benchmark::kLongBench) {
    if (r.longbench_dir.empty()) fail("--bench longbench needs --longbench-dir, the folder of the <dataset>.jsonl files");
    if (!r.lengths.empty()) fail("--lengths is for ruler and niah; LongBench prompts are cut to --max-length");
    if (!r.depths.empty()) fail("--depths is for --bench niah");
    plan.tasks = longbench_dataset_list(r);
    plan.samples = r.samples > 0 ? r.samples : -1;
  } else {
    if (!r.longbench_dir.empty() || r.max_length > 0) fail("--longbench-dir and --max-length are for --bench longbench");
    if (r.lengths.empty()) fail("give the lengths to evaluate with --lengths, e.g. 4k,8k");
    plan.lengths = r.lengths;
    if (plan.benchmark == Benchmark::kNiah) {
      if (!r.tasks.empty()) fail("--tasks is for --bench ruler and longbench; NIAH has one task");
      plan.depths = r.depths.empty() ? niah_default_depths() : r.depths;
    } else {
      if (!r.depths.empty()) fail("--depths is for --bench niah");
      plan.tasks = ruler_task_list(r, progress);
      plan.samples = r.samples > 0 ? r.samples : kRulerDefaultSamples;
    }
  }
  plan.methods = sweep_methods(r);
  return plan;
}

// --questions-per-context and --context-mode: what Q > 1 can run, checked before anything
// loads. Under Q > 1 the tasks default to those that can ask Q different questions.
void check_shared_contexts(EvalRequest& r, bool remote) {
  if (r.questions_per_context < 1) {
    fail("--questions-per-context must be at least 1, got {}", r.questions_per_context);
  }
  const TurnMode mode = turn_mode_from_name(r.context_mode);
  if (r.questions_per_context == 1) {
    if (mode != TurnMode::kIndependent) fail("--context-mode {} needs --questions-per-context above 1", r.context_mode);
    return;
  }
  if (r.bench != "ruler") {
    fail("--questions-per-context {} is for --bench ruler (its tasks {}); {} asks one question a prompt",
         r.questions_per_context, fmt::join(tasks_with_many_questions(), ", "), r.bench);
  }
  if (remote) fail("--questions-per-context above 1 runs on this process's model, not with --server");
  const std::vector<std::string>& many = tasks_with_many_questions();
  if (r.tasks.empty()) {  // the QA tasks only with their data files, as RULER's default leaves them out
    for (const std::string& task : many) {
      if ((task == "qa_1" && r.squad.empty()) || (task == "qa_2" && r.hotpotqa.empty())) continue;
      r.tasks.push_back(task);
    }
  }
  for (const std::string& task : r.tasks) {
    if (std::find(many.begin(), many.end(), task) == many.end()) {
      fail("task {} cannot ask {} different questions over one haystack; the tasks that can: {}", task,
           r.questions_per_context, fmt::join(many, ", "));
    }
  }
  // A context shared by Q questions is compressed before them; a press that evicts later
  // keeps what depends on the question it is decoding. deferkv is the exception: its context
  // is deferred (its pool, as the press is given: pool=all by default, the whole context),
  // and each question evicts at its own step d (docs/compression.md).
  for (const std::string& press : r.presses) {
    if (press != "full" && press_evicts_after_prefill(press) && !press_resumes_deferred(press)) {
      fail("press '{}' evicts after the prefill (at a decode step or while decoding), so it cannot compress a context "
           "shared by {} questions; --questions-per-context above 1 takes presses that evict once at the prompt's end, "
           "and deferkv",
           press, r.questions_per_context);
    }
  }
}

// Everything a row's result depends on, and the sweep's grid under "sweep". A field added here
// is part of every row's identity (row_context) without more ado.
nlohmann::ordered_json config_of(const EvalRequest& r, const SweepPlan& plan, const std::string& chat,
                                 const nlohmann::ordered_json& max_lengths) {
  nlohmann::ordered_json c;
  c["benchmark"] = r.bench;
  c["model"] = {{"path", std::filesystem::absolute(r.model).string()}, {"sha256", sha256_file(r.model)}};
  if (!r.draft_model.empty()) {
    c["draft_model"] = {{"path", std::filesystem::absolute(r.draft_model).string()},
                        {"sha256", sha256_file(r.draft_model)}};
  }
  if (plan.benchmark == Benchmark::kLongBench) {
    c["longbench_dir"] = std::filesystem::absolute(r.longbench_dir).string();
    // As given: the limits it resolves to per dataset follow from the model and the dataset.
    c["max_length"] = r.max_length > 0 ? nlohmann::ordered_json(r.max_length) : nlohmann::ordered_json("model context");
  }
  c["seed"] = r.seed;
  if (r.word_split != "all") c["word_split"] = r.word_split;
  c["decoding"] = r.sampling.temperature <= 0
                      ? nlohmann::ordered_json{{"temperature", 0}}
                      : nlohmann::ordered_json{{"temperature", r.sampling.temperature},
                                               {"top_k", r.sampling.top_k},
                                               {"top_p", r.sampling.top_p},
                                               {"min_p", r.sampling.min_p}};
  c["kv_cache"] = {{"type_k", r.cache_type_k}, {"type_v", r.cache_type_v}};
  c["chat_template"] = chat.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(chat);
  // Whether the press compressed the context before the question was read: part of every
  // row's identity, so a resumed sweep never mixes the two modes.
  c["question_agnostic"] = r.question_agnostic;
  // Only with several questions, so the folders of one-question sweeps keep their identity.
  if (r.questions_per_context > 1) {
    c["questions_per_context"] = r.questions_per_context;
    c["context_mode"] = r.context_mode;
  }
  // The prompt's tokens per forward pass pick the matmul route (matvec below a per-type count,
  // tiled GEMM above), whose sums round differently: greedy answers can change with it.
  c["n_batch"] = r.n_batch;
  c["threads"] = r.threads;
  if (r.data_dir != TaskOptions::default_data_dir()) c["data_dir"] = r.data_dir;
  if (!r.squad.empty()) c["squad"] = std::filesystem::absolute(r.squad).string();
  if (!r.hotpotqa.empty()) c["hotpotqa"] = std::filesystem::absolute(r.hotpotqa).string();
  c["sweep"] = sweep_config(plan);
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

struct Stopped {};  // thrown out of the executor when the caller asked to stop

}  // namespace

std::vector<std::pair<KvBudget, std::string>> labelled_budgets(const std::vector<int64_t>& entries,
                                                               const std::vector<double>& ratios) {
  std::vector<std::pair<KvBudget, std::string>> out;
  for (int64_t b : entries) {
    if (b < 1) fail("--kv-budget: {} is not a positive whole number of entries", b);
    out.emplace_back(KvBudget::per_head(b), fmt::format("{}", b));
  }
  for (double ratio : ratios) out.emplace_back(KvBudget::ratio(ratio), fmt::format("r{}", ratio));
  return out;
}

nlohmann::ordered_json run_record(const nlohmann::ordered_json& more) {
  nlohmann::ordered_json run = {{"git_commit", git_commit()}};
  run.update(more);
  run["peak_rss_bytes"] = peak_rss_bytes();
  return run;
}

EvalOutcome run_eval(const EvalRequest& request, std::FILE* progress, const std::function<bool()>& stop_requested,
                     const RemoteRunnerFactory& make_remote) {
  EvalRequest r = request;
  if (r.model.empty()) r.model = embedded_eval_model_path();
  if (!r.chat && !r.chat_template.empty()) fail("--chat-template and --no-chat-template exclude each other");
  if (r.threads == 0) r.threads = default_thread_count();  // resolved before it enters the configuration
  if (r.threads < 1) fail("threads must be at least 1 (or 0: the cores this process may use), got {}", r.threads);
  if (r.n_batch < 1) fail("the batch size must be at least 1, got {}", r.n_batch);
  for (const std::string& type : {r.cache_type_k, r.cache_type_v}) check_kv_cache_type_name(type);
  check_shared_contexts(r, static_cast<bool>(make_remote));
  SweepPlan plan = plan_of(r, progress);
  const Shard shard = Shard::parse(r.shard);
  r.sampling.validate();

  if (make_remote && !r.draft_model.empty()) fail("--draft-model is for local runs; a server drafts with its own");
  SamplerParams sampling = r.sampling;
  sampling.seed = r.seed;

  const auto model = Model::load(r.model);
  warn_if_card_does_not_cover(*model, plan.benchmark, progress);
  const std::shared_ptr<const Model> draft = r.draft_model.empty() ? nullptr : Model::load(r.draft_model);
  // A remote runner checks its side (e.g. that the servers answer) before any sample.
  const std::unique_ptr<RemoteSampleRunner> remote = make_remote ? make_remote(plan, model->tokenizer(), sampling) : nullptr;
  std::unique_ptr<TaskGenerator> generator;
  std::unique_ptr<LongBenchSet> longbench;
  // A remote chat API applies its own chat format to the plain prompt.
  const PromptOptions prompt{r.chat && !(remote && remote->chat()), r.chat_template};
  nlohmann::ordered_json max_lengths;  // LongBench: per dataset
  if (plan.benchmark == Benchmark::kLongBench) {
    LongBenchOptions options;
    options.data_dir = r.longbench_dir;
    options.datasets = plan.tasks;
    options.samples = plan.samples;
    options.max_length = r.max_length;
    options.prompt = prompt;
    longbench = std::make_unique<LongBenchSet>(model->tokenizer(), model->config().n_ctx_train, options);
    for (const std::string& d : plan.tasks) {
      max_lengths[d] = longbench->max_length(d);
      plan.rows.push_back(longbench->rows(d));
    }
  } else {
    TaskOptions task_options;
    task_options.data_dir = r.data_dir;
    task_options.squad_path = r.squad;
    task_options.hotpotqa_path = r.hotpotqa;
    task_options.prompt = prompt;
    task_options.seed = r.seed;
    task_options.word_split = word_split_from_name(r.word_split);
    task_options.questions_per_context = r.questions_per_context;
    generator = std::make_unique<TaskGenerator>(model->tokenizer(), task_options);
    for (int64_t length : plan.lengths) {
      if (length > model->config().n_ctx_train && progress != nullptr) {
        fmt::print(progress, "warning: {} tokens is beyond the model's training context of {}\n", length,
                   model->config().n_ctx_train);
      }
    }
  }

  const std::string stem = fmt::format("{}-{}", r.bench, std::filesystem::path(r.model).stem().string());
  const std::string chat = longbench ? longbench->chat_template_name() : generator->chat_template_name();
  EvalOutcome outcome;
  nlohmann::ordered_json config = config_of(r, plan, chat, max_lengths);
  if (remote) remote->describe_in(config);
  outcome.dir = prepare_results_dir(r.output, r.name, stem, config);
  if (progress != nullptr) {
    fmt::print(progress, "results: {}{} ({})\n", outcome.dir,
               shard.whole() ? "" : fmt::format(" (shard {}/{})", shard.index, shard.count),
               question_mode_name(r.question_agnostic));
  }

  SessionOptions session_options;
  session_options.n_batch = r.n_batch;
  session_options.cache_type_k = r.cache_type_k;
  session_options.cache_type_v = r.cache_type_v;
  const SampleRunner runner(model, draft, make_thread_pool(r.threads), sampling, session_options, r.question_agnostic,
                            progress, turn_mode_from_name(r.context_mode));
  KeptMaps kept_maps(outcome.dir);  // local rows only: a remote one has no session to show
  std::atomic<int64_t> ran{0};       // a remote runner runs rows on several threads
  const SampleExecutor execute = [&](const SweepMethod& method, const TaskSample& sample) {
    if (stop_requested && stop_requested()) throw Stopped{};
    if (remote) {
      SampleRun run = (*remote)(method, sample);
      ++ran;
      return run;
    }
    KeptSetRecorder kept;
    const bool map = sample.turns.empty() && kept_maps.wanted(method);
    SampleRun run = runner(method, sample, map ? &kept : nullptr);
    if (map) kept_maps.write(method, sample, kept);
    ++ran;
    return run;
  };
  const int concurrency = remote ? remote->concurrency() : 1;
  const auto start = std::chrono::steady_clock::now();
  try {
    if (longbench) {
      run_sweep(plan, *longbench, execute, outcome.dir, progress, shard, concurrency);
    } else {
      run_sweep(plan, *generator, execute, outcome.dir, progress, shard, concurrency);
    }
  } catch (const Stopped&) {
    outcome.interrupted = true;
  }
  outcome.samples_run = ran;
  outcome.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  outcome.failed_rows = failed_rows(plan, outcome.dir, shard);
  // A shard's reports need every shard's rows: `eval merge` writes them.
  if (shard.whole()) {
    nlohmann::ordered_json run = {{"samples_run", outcome.samples_run}, {"seconds", outcome.seconds}};
    if (remote) {
      run.update(remote->run_fields());
    } else {
      run["threads"] = r.threads;
    }
    outcome.tables = write_reports(plan, outcome.dir, run_record(run));
  }
  return outcome;
}

}  // namespace deferkv::eval
