#pragma once
// `deferkv eval` as a library call: a RULER, Needle-in-a-Haystack or LongBench sweep over
// presses and budgets on one model, run into a results folder (resumable, growable, one
// shard of N), with its reports. The CLI's flags and the Python module's deferkv.eval.run
// both fill an EvalRequest; everything a row's result depends on goes into the folder's
// config.json (eval_sweep.h).
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "deferkv/eval_sweep.h"
#include "deferkv/eval_tasks.h"
#include "deferkv/press.h"
#include "deferkv/sampler.h"

namespace deferkv::eval {

struct EvalRequest {
  std::string model;        // GGUF; "" the embedded retrieval model (models/README.md)
  std::string draft_model;  // for presses that draft (speckv); "" none
  std::string bench = "ruler";  // ruler, niah or longbench
  // RULER tasks or LongBench datasets; empty: RULER's 13 (qa_1/qa_2 only with their data
  // files) or LongBench's 16 English datasets.
  std::vector<std::string> tasks;
  std::vector<int64_t> lengths;  // tokens (RULER, NIAH)
  std::vector<double> depths;    // NIAH, percent; empty: 0, 11, …, 100
  std::vector<std::string> presses = {"full"};  // press specs; "full" keeps everything
  std::vector<int64_t> budgets;  // entries per KV head; every press but "full" runs at each
  std::vector<double> ratios;    // or compression ratios (kvpress's), not both
  int64_t samples = 0;  // RULER: per task and length (0: 500); LongBench: per dataset (0: all)
  uint64_t seed = 42;   // of the task generators and of sampled decoding
  std::string word_split = "all";
  SamplerParams sampling = greedy();
  int threads = 1;  // 0: the cores this process may use (default_thread_count())
  int64_t n_batch = 512;
  std::string cache_type_k = "f16", cache_type_v = "f16";
  // Compress each prompt's context before its question is read (GenerateOptions'
  // question_agnostic); false: the press sees context and question together.
  bool question_agnostic = false;
  // Shared contexts (issue 44, in the spirit of SCBench): Q questions over each sample's one
  // haystack, its context compressed once and every question answered from it; 1: one
  // question a prompt, as always. Above 1: RULER's tasks_with_many_questions() only (the
  // default tasks then), presses that evict once at the prompt's end, a local run.
  int64_t questions_per_context = 1;
  std::string context_mode = "independent";  // or "multi-turn" (TurnMode), with Q > 1
  std::string output = "results";  // the folder the results folder is made in
  std::string name;                // the results folder's name; "" from the configuration's hash
  std::string shard = "1/1";       // "i/N": run shard i of N of the grid
  bool chat = true;                // the model's chat format, when it has one
  std::string chat_template;       // a chat format by name instead of the model's
  std::string data_dir = TaskOptions::default_data_dir();
  std::string squad, hotpotqa;     // qa_1's and qa_2's data files
  std::string longbench_dir;       // LongBench: the folder of <dataset>.jsonl
  int64_t max_length = 0;          // LongBench: prompt tokens kept (0: the model's context minus the answer)

  static SamplerParams greedy() {
    SamplerParams s;
    s.temperature = 0;
    return s;
  }
};

struct EvalOutcome {
  std::string dir;          // the results folder
  int64_t samples_run = 0;  // this run's (rows already in the folder are reused)
  double seconds = 0;
  bool interrupted = false;  // stop_requested said so; the reports hold what was done
  // Rows (of this shard) whose run failed: recorded in failures*.jsonl, retried by a rerun.
  int64_t failed_rows = 0;
  // The score and cost tables as Markdown; empty for a shard of several (eval merge writes
  // the reports once every shard is done).
  std::string tables;
};

// Where the samples run when not on this process's model (deferkv eval --server: on
// OpenAI-compatible servers). The prompts are still made and sized here, with -m's tokenizer.
class RemoteSampleRunner {
 public:
  virtual ~RemoteSampleRunner() = default;
  // Prompts go as plain text, for the remote side's chat format.
  virtual bool chat() const = 0;
  // Puts the remote side in config.json (part of every row's identity) in place of what
  // only a local run has (threads, batch size, cache types).
  virtual void describe_in(nlohmann::ordered_json& config) const = 0;
  // What summary.json's run records of it (servers, concurrency).
  virtual nlohmann::ordered_json run_fields() const = 0;
  // Rows run at once; operator() is then called from that many threads.
  virtual int concurrency() const = 0;
  // One row. An error is the row's failure.
  virtual SampleRun operator()(const SweepMethod& method, const TaskSample& sample) const = 0;
};
// Made once the plan is known (a runner may refuse the plan's presses), with the run's sampling.
using RemoteRunnerFactory =
    std::function<std::unique_ptr<RemoteSampleRunner>(const SweepPlan& plan, const Tokenizer& tokenizer,
                                                      const SamplerParams& sampling)>;

// Runs the sweep, printing warnings and progress to `progress` (may be null), and checking
// `stop_requested` (may be empty) before each sample: when it says stop, the samples in
// flight are finished and written, then the reports of what is done. `remote` (may be empty)
// runs the samples elsewhere. Bad requests are errors naming the field at fault.
EvalOutcome run_eval(const EvalRequest& request, std::FILE* progress,
                     const std::function<bool()>& stop_requested = {}, const RemoteRunnerFactory& remote = {});

// Budgets with their labels as reports show them: entries per head ("64"), then ratios
// ("r0.5"); a budget below one entry is an error.
std::vector<std::pair<KvBudget, std::string>> labelled_budgets(const std::vector<int64_t>& entries,
                                                               const std::vector<double>& ratios);

// What summary.json records of the run (write_reports' `run`): the commit deferkv was built
// from, the fields of `more`, and the process's peak resident memory.
nlohmann::ordered_json run_record(const nlohmann::ordered_json& more);

}  // namespace deferkv::eval
