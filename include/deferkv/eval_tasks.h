#pragma once
// The samples of the evaluation benchmarks, generated for one model: RULER's 13
// synthetic tasks (NVIDIA/RULER scripts/data/synthetic, see docs/evaluation.md)
// and Needle-in-a-Haystack on Paul Graham's essays. Lengths are counted in the
// model's own tokens, BOS and chat format included: the haystack of each sample is sized
// by bisection so that the prompt (plus the tokens to generate, for RULER) fits the
// target length as closely as the haystack's unit allows. Samples depend only on the
// tokenizer, the options and (task, length, index): the same seed gives the same text.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace deferkv {
class Tokenizer;
}

namespace deferkv::eval {

struct PromptOptions {
  bool chat = true;           // use the model's chat format when it has one
  std::string chat_template;  // a chat format by name (ChatTemplate::known_names), "" = the model's
};

// Which words the needles' keys (and other wonderwords draws) come from: every word, or
// one of two disjoint halves, for training a model on one and testing it on the other.
enum class WordSplit { kAll, kTrain, kHeldOut };
WordSplit word_split_from_name(std::string_view name);  // "all", "train", "heldout"

struct TaskOptions {
  // Folder holding ruler/PaulGrahamEssays.json and ruler/wonderwords/*.txt.
  std::string data_dir = default_data_dir();
  std::string squad_path;     // SQuAD v2 dev JSON, read by qa_1
  std::string hotpotqa_path;  // HotpotQA dev (distractor) JSON, read by qa_2
  PromptOptions prompt;
  uint64_t seed = 42;  // RULER's default random_seed
  WordSplit word_split = WordSplit::kAll;
  // Questions asked over each sample's one haystack (eval --questions-per-context; issue 44's
  // shared contexts). 1: today's samples, unchanged. Above 1 only for the tasks
  // tasks_with_many_questions() names; the others are refused by name.
  int64_t questions_per_context = 1;

  // The data/ folder of this source tree.
  static std::string default_data_dir();
};

// One question asked after a sample's context (questions_per_context > 1).
struct TaskTurn {
  std::vector<int32_t> question;        // the ids read after the context (the sample's tokens' split)
  std::vector<std::string> references;  // what the metric compares with
};

struct TaskSample {
  std::string task;           // a RULER task ("niah_single_1", …), "niah" or a LongBench dataset
  int64_t target_length = 0;  // tokens (LongBench: the truncation length)
  int64_t index = 0;          // the sample's number (RULER, LongBench row); 0 for NIAH
  double depth_percent = -1;  // NIAH: where the needle was asked to go
  std::string prompt;         // everything the model reads, answer prefix included
  std::vector<int32_t> tokens;          // the prompt's ids (BOS and chat tokens included)
  std::vector<std::string> references;  // RULER: the outputs; NIAH: the needle; LongBench: answers
  int64_t max_new_tokens = 0;
  bool stop_at_newline = false;  // NIAH stops at a newline; RULER only at end of generation
  std::vector<std::string> all_classes;  // LongBench: trec's labels, read by its metric
  // tokens[0, context_tokens): the context, up to the end of the template's context field
  // (the chat format's opening included); the rest, the question: what follows the context
  // in the template (its question, instructions, closing tags), the chat turn's end, the
  // assistant's opening and the answer prefix. Question-agnostic mode compresses the
  // context alone, then reads the rest. A token that merges across the split goes with the
  // question; a LongBench prompt whose truncation cut into the question has no question part.
  int64_t context_tokens = 0;
  // questions_per_context Q > 1: Q questions over tokens[0, context_tokens), turns[0] being
  // the sample's own (tokens after the split, references); empty when Q = 1.
  std::vector<TaskTurn> turns;
};

// The RULER tasks that can ask several different questions over one haystack:
// niah_multikey_1..3, niah_multivalue, niah_multiquery, vt, qa_1 and qa_2.
const std::vector<std::string>& tasks_with_many_questions();

class TaskGenerator {
 public:
  // Errors: an unknown chat format, or a model chat template that is not recognised.
  TaskGenerator(const Tokenizer& tokenizer, const TaskOptions& options);
  ~TaskGenerator();
  TaskGenerator(const TaskGenerator&) = delete;
  TaskGenerator& operator=(const TaskGenerator&) = delete;

  // Sample `index` of a RULER task (eval_metrics.h's ruler_tasks()) whose prompt plus
  // tokens to generate fit in `length` tokens. Errors name the task and what is missing
  // (a data file, a QA file, a length too short for the task's fixed text).
  TaskSample ruler(std::string_view task, int64_t length, int64_t index) const;
  // The NIAH cell: the needle at `depth_percent` (0-100) of a prompt of `length` tokens.
  TaskSample niah(int64_t length, double depth_percent) const;

  // The chat format prompts are written in, "" for plain text.
  std::string chat_template_name() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// RULER's tokens_to_generate of a task (constants.py): niah 128, vt 30, cwe 120, fwe 50,
// qa 32. Unknown task: an error listing the 13.
int64_t ruler_tokens_to_generate(std::string_view task);

// NIAH's needle (the San Francisco sentence, with its surrounding newlines) and depth grid:
// round(linspace(0, 100, 10)) = 0, 11, 22, …, 89, 100.
std::string_view niah_needle();
std::vector<double> niah_default_depths();

}  // namespace deferkv::eval
