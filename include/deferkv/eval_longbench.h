#pragma once
// LongBench v1 as THUDM/LongBench's pred.py feeds it to a model (docs/evaluation.md):
// the official JSONL files, the prompt of each dataset (dataset2prompt.json), its
// max new tokens (dataset2maxlen.json), middle truncation on tokens, and the chat format
// for all datasets but the few-shot and code ones.
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "deferkv/eval_tasks.h"

namespace deferkv {
class Tokenizer;
}

namespace deferkv::eval {

// One line of <dataset>.jsonl in the official schema.
struct LongBenchRow {
  std::string input, context;
  std::vector<std::string> answers;
  int64_t length = 0;  // the official word count of the context
  std::string dataset, language;
  std::vector<std::string> all_classes;  // trec's labels; empty when null
  std::string id;                        // _id
};

// The rows of `path`, at most `limit` of them (all when limit < 0). A missing file, a
// line that is not JSON or lacks a field is an error naming the file (and line).
std::vector<LongBenchRow> read_longbench_file(const std::string& path, int64_t limit = -1);

// The 16 English datasets of the LongBench v1 papers' tables, in their column order.
std::span<const std::string_view> longbench_english_datasets();

// pred.py writes the prompt of every dataset but trec, triviaqa, samsum, lsht, lcc and
// repobench-p in the model's chat format.
bool longbench_uses_chat(std::string_view dataset);

// pred.py's middle truncation: when `tokens` holds more than max_length ids, the first
// and the last floor(max_length / 2) of them; otherwise all of them.
std::vector<int32_t> middle_truncate(std::span<const int32_t> tokens, int64_t max_length);

// The prompt template with {context} and {input} filled in one pass, as Python's
// str.format does ({{ and }} are braces; another field is an error).
std::string fill_longbench_prompt(std::string_view prompt_template, const LongBenchRow& row);

// dataset2prompt.json and dataset2maxlen.json of a folder (data/longbench by default).
class LongBenchConfig {
 public:
  static LongBenchConfig load(const std::string& dir);
  static std::string default_dir();  // the data/longbench folder of this source tree

  // Errors name the dataset and the file that lacks it.
  const std::string& prompt_template(std::string_view dataset) const;
  int64_t max_new_tokens(std::string_view dataset) const;

 private:
  std::string dir_;
  std::map<std::string, std::string, std::less<>> prompts_;
  std::map<std::string, int64_t, std::less<>> max_new_tokens_;
};

struct LongBenchOptions {
  std::string data_dir;                              // holds <dataset>.jsonl
  std::string config_dir = LongBenchConfig::default_dir();
  std::vector<std::string> datasets;                 // empty: the 16 English ones
  int64_t samples = -1;                              // per dataset; < 0: all
  // Prompt tokens kept before the chat format; <= 0: the model's context minus the
  // dataset's max new tokens (the role of pred.py's model2maxlen.json).
  int64_t max_length = 0;
  PromptOptions prompt;
};

// The rows of the chosen datasets, read once, and the samples made from them.
class LongBenchSet {
 public:
  // Errors: a dataset file missing (named), a dataset absent from the configuration.
  LongBenchSet(const Tokenizer& tokenizer, int64_t n_ctx_train, const LongBenchOptions& options);
  ~LongBenchSet();
  LongBenchSet(const LongBenchSet&) = delete;
  LongBenchSet& operator=(const LongBenchSet&) = delete;

  const std::vector<std::string>& datasets() const;
  int64_t rows(std::string_view dataset) const;
  // The max_length a dataset's prompts are truncated to.
  int64_t max_length(std::string_view dataset) const;
  const LongBenchRow& row(std::string_view dataset, int64_t index) const;

  // Row `index` of `dataset` as the model reads it: task = dataset, references = answers,
  // target_length = max_length; samsum stops at a newline as pred.py's does.
  TaskSample sample(std::string_view dataset, int64_t index) const;

  std::string chat_template_name() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace deferkv::eval
