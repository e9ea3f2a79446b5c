// `deferkv make-data`: writes RULER task samples as JSON lines, for training a model on
// the very generator `deferkv eval` tests it with (tools/train/ reads these files).
//
//   deferkv make-data -m vocab.gguf --tasks niah_single_1,vt --lengths 512:1024:256 \
//       --samples 1000 --seed 7 --word-split train -o train.jsonl
//
// Each line: {"task", "length", "index", "tokens" (the prompt's ids, BOS included),
// "answer_tokens" (what the model should write next: the references in the order they
// first appear in the prompt, joined by ", ", then "." and end of sequence), "references"
// (the generator's order)}. Prompts are plain text (no chat format).
// Samples are generated on several threads; the file's order is the order of (length,
// task, index), so a seed always gives the same file.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <fstream>
#include <memory>
#include <mutex>
#include <set>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "commands.h"
#include "common_options.h"
#include "deferkv/error.h"
#include "deferkv/eval_tasks.h"
#include "deferkv/tokenizer.h"
#include "eval_lists.h"

namespace deferkv::cli {
namespace {

struct MakeDataArgs {
  std::string model;
  std::string tasks = "niah_single_1";
  std::string lengths = "1k";
  int64_t samples = 100;
  uint64_t seed = 1;
  std::string word_split = "all";
  std::string data_dir = eval::TaskOptions::default_data_dir();
  int threads = 0;
  std::string output;
};

// The references in the order the prompt first mentions them. RULER's multi-value
// needles are shuffled by the run's seed, so the generator's order is a permutation that
// differs between training seeds: a model cannot know which value comes first, while
// the scorers (string_match_all) take the values in any order.
std::vector<std::string> in_prompt_order(const eval::TaskSample& sample) {
  std::vector<std::string> references = sample.references;
  std::stable_sort(references.begin(), references.end(), [&](const std::string& a, const std::string& b) {
    return sample.prompt.find(a) < sample.prompt.find(b);  // npos (not found) sorts last
  });
  return references;
}

// The ids the model should produce after the prompt: the references as one answer
// (in prompt order, joined by ", ", then "."), then end of sequence. The answer is tokenized in context
// (prompt + " " + answer) so that the seam tokenizes as in a continuous text. A prompt
// that ends in a space (VT's "they are: ") ends in a lone space token, which the joint
// encoding would merge into the answer's first piece; there the answer is encoded on its
// own, and a SentencePiece vocabulary's space prefix then shows as a second space, which
// the substring scorers ignore.
std::vector<int32_t> answer_tokens(const Tokenizer& tokenizer, const eval::TaskSample& sample) {
  const std::string answer = fmt::format("{}.", fmt::join(in_prompt_order(sample), ", "));
  std::vector<int32_t> answer_ids;
  if (!sample.prompt.empty() && sample.prompt.back() == ' ') {
    answer_ids = tokenizer.encode(answer, false, false);
  } else {
    const std::vector<int32_t> joint = tokenizer.encode(sample.prompt + " " + answer, true, false);
    const std::vector<int32_t>& prompt = sample.tokens;
    if (joint.size() <= prompt.size() || !std::equal(prompt.begin(), prompt.end(), joint.begin())) {
      fail("make-data: {} sample {} at {} tokens: the answer does not continue the prompt's tokens", sample.task,
           sample.index, sample.target_length);
    }
    answer_ids.assign(joint.begin() + static_cast<std::ptrdiff_t>(prompt.size()), joint.end());
  }
  answer_ids.push_back(tokenizer.eos_id());
  return answer_ids;
}

struct Job {
  std::string task;
  int64_t length;
  int64_t index;
};

void run_make_data(const MakeDataArgs& args) {
  if (args.output.empty()) fail("make-data: give the output file with -o");
  if (args.samples <= 0) fail("make-data: --samples must be positive, got {}", args.samples);
  const auto tokenizer = Tokenizer::from_path(args.model);
  if (tokenizer->eos_id() < 0) fail("make-data: the vocabulary of '{}' has no end-of-sequence token", args.model);

  eval::TaskOptions options;
  options.data_dir = args.data_dir;
  options.seed = args.seed;
  options.word_split = eval::word_split_from_name(args.word_split);
  options.prompt.chat = false;  // a model trained on these reads plain prompts
  const eval::TaskGenerator generator(*tokenizer, options);

  std::vector<Job> jobs;
  for (int64_t length : parse_lengths(args.lengths)) {
    for (const std::string& task : split_names(args.tasks)) {
      eval::ruler_tokens_to_generate(task);  // unknown task: an error before any work
      for (int64_t i = 0; i < args.samples; ++i) jobs.push_back({task, length, i});
    }
  }

  auto make_line = [&](const Job& job) {
    const eval::TaskSample sample = generator.ruler(job.task, job.length, job.index);
    const nlohmann::json row = {{"task", sample.task},   {"length", sample.target_length},
                                {"index", sample.index}, {"tokens", sample.tokens},
                                {"answer_tokens", answer_tokens(*tokenizer, sample)},
                                {"references", sample.references}};
    return row.dump();
  };
  // The generator loads its data files on first use, which is not thread-safe: the
  // first sample of each task is made here, the rest on the workers.
  std::vector<std::string> lines(jobs.size());
  std::set<std::string> warmed;
  for (size_t j = 0; j < jobs.size(); ++j) {
    if (warmed.insert(jobs[j].task).second) lines[j] = make_line(jobs[j]);
  }
  std::atomic<size_t> next{0};
  std::mutex error_mutex;
  std::string first_error;
  auto work = [&] {
    for (size_t j; (j = next.fetch_add(1)) < jobs.size();) {
      if (!lines[j].empty()) continue;
      try {
        lines[j] = make_line(jobs[j]);
      } catch (const Error& e) {
        const std::lock_guard lock(error_mutex);
        if (first_error.empty()) first_error = e.what();
        next = jobs.size();
      }
    }
  };
  const int n_threads =
      args.threads > 0 ? args.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::vector<std::thread> workers;
  for (int t = 0; t < n_threads; ++t) workers.emplace_back(work);
  for (auto& w : workers) w.join();
  if (!first_error.empty()) fail("{}", first_error);

  // Written to a temporary name and renamed, so a failure leaves no partial file.
  const std::string partial = args.output + ".partial";
  {
    std::ofstream out(partial, std::ios::binary | std::ios::trunc);
    if (!out) fail("make-data: cannot write '{}'", partial);
    for (const std::string& line : lines) out << line << '\n';
    if (!out.flush()) fail("make-data: writing '{}' failed", partial);
  }
  if (std::rename(partial.c_str(), args.output.c_str()) != 0) fail("make-data: cannot rename '{}' to '{}'", partial, args.output);
  fmt::print("wrote {} samples to {}\n", lines.size(), args.output);
}

}  // namespace

void add_make_data_command(CLI::App& app) {
  auto args = std::make_shared<MakeDataArgs>();
  CLI::App* cmd = app.add_subcommand("make-data", "Write RULER task samples with their answers as JSON lines (training data)");
  add_model_option(*cmd, args->model);
  cmd->get_option("--model")->description("GGUF model or vocabulary whose tokenizer to use");
  cmd->add_option("--tasks", args->tasks, "RULER tasks, comma-separated")->capture_default_str();
  cmd->add_option("--lengths", args->lengths, "Lengths in tokens (prompt + generation): 1k,2k or start:end:step")
      ->capture_default_str();
  cmd->add_option("--samples", args->samples, "Samples per task and length")->capture_default_str();
  cmd->add_option("-s,--seed", args->seed, "Seed of the generators (use other seeds than the evaluation's)")
      ->capture_default_str();
  cmd->add_option("--word-split", args->word_split,
                  "Needle key words from all word-list lines, the even ones (train) or the odd ones (heldout)")
      ->capture_default_str();
  cmd->add_option("--data-dir", args->data_dir, "Folder with ruler/PaulGrahamEssays.json and ruler/wonderwords/")
      ->capture_default_str();
  add_threads_option(*cmd, args->threads);
  cmd->add_option("-o,--output", args->output, "Output JSONL file")->required();
  cmd->callback([args] { run_make_data(*args); });
}

}  // namespace deferkv::cli
