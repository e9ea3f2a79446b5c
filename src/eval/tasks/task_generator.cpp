// The RULER task table (RULER's scripts/synthetic.yaml with constants.py's generation
// lengths) and the public TaskGenerator over the family generators.
#include <algorithm>
#include <array>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "base/resource_dir.h"
#include "deferkv/error.h"
#include "deferkv/eval_metrics.h"
#include "deferkv/eval_tasks.h"
#include "eval/tasks/generators.h"
#include "eval/tasks/rng.h"

namespace deferkv::eval {
namespace {

struct NiahTask {
  std::string_view name;
  NiahConfig config;
};

constexpr NiahConfig niah(Haystack h, NeedleKind k, NeedleKind v, int keys, int values, int queries) {
  return {h, k, v, keys, values, queries};
}

constexpr auto kWords = NeedleKind::kWords, kNumbers = NeedleKind::kNumbers, kUuids = NeedleKind::kUuids;
constexpr std::array<NiahTask, 8> kNiahTasks = {{
    {"niah_single_1", niah(Haystack::kNoise, kWords, kNumbers, 1, 1, 1)},
    {"niah_single_2", niah(Haystack::kEssay, kWords, kNumbers, 1, 1, 1)},
    {"niah_single_3", niah(Haystack::kEssay, kWords, kUuids, 1, 1, 1)},
    {"niah_multikey_1", niah(Haystack::kEssay, kWords, kNumbers, 4, 1, 1)},
    {"niah_multikey_2", niah(Haystack::kNeedle, kWords, kNumbers, 1, 1, 1)},
    {"niah_multikey_3", niah(Haystack::kNeedle, kUuids, kUuids, 1, 1, 1)},
    {"niah_multivalue", niah(Haystack::kEssay, kWords, kNumbers, 1, 4, 1)},
    {"niah_multiquery", niah(Haystack::kEssay, kWords, kNumbers, 1, 1, 4)},
}};

const NiahTask* find_niah(std::string_view task) {
  for (const NiahTask& t : kNiahTasks) {
    if (t.name == task) return &t;
  }
  return nullptr;
}

void check_task(std::string_view task) {
  for (std::string_view known : ruler_tasks()) {
    if (known == task) return;
  }
  fail("unknown RULER task '{}'; the tasks are {}", task, fmt::join(ruler_tasks(), ", "));
}

}  // namespace

WordSplit word_split_from_name(std::string_view name) {
  if (name == "all") return WordSplit::kAll;
  if (name == "train") return WordSplit::kTrain;
  if (name == "heldout") return WordSplit::kHeldOut;
  fail("unknown word split '{}' (known: all, train, heldout)", name);
}

std::string TaskOptions::default_data_dir() { return resource_dir() + "/data"; }

int64_t ruler_tokens_to_generate(std::string_view task) {
  check_task(task);
  if (find_niah(task) != nullptr) return 128;
  if (task == "vt") return 30;
  if (task == "cwe") return 120;
  if (task == "fwe") return 50;
  return 32;  // qa_1, qa_2
}

struct TaskGenerator::Impl {
  Impl(const Tokenizer& tokenizer, const TaskOptions& options)
      : options(options),
        prompt(tokenizer, options.prompt),
        data(options.data_dir, options.squad_path, options.hotpotqa_path, options.word_split),
        context{prompt, data, options.seed, options.questions_per_context} {
    if (options.questions_per_context < 1) {
      fail("questions per context must be at least 1, got {}", options.questions_per_context);
    }
  }

  GeneratedPrompt generate(std::string_view task, int64_t length, int64_t budget, uint64_t seed, int64_t index) const {
    if (const NiahTask* t = find_niah(task)) return generate_ruler_niah(context, t->config, budget, seed);
    if (task == "vt") return generate_variable_tracking(context, 1, 4, budget, seed);
    if (task == "cwe") return generate_common_words(context, CweConfig{30, 3, 10}, length, budget, seed);
    if (task == "fwe") return generate_freq_words(context, 2.0, budget, seed);
    if (task == "qa_1") return generate_qa(context, data.squad(), task, index, budget, seed);
    return generate_qa(context, data.hotpotqa(), task, index, budget, seed);
  }

  const NeedleHaystack& needle_haystack() const {
    if (!needle) needle = std::make_unique<NeedleHaystack>(context);
    return *needle;
  }

  TaskOptions options;
  PromptBuilder prompt;
  TaskData data;
  GeneratorContext context;
  mutable std::unique_ptr<NeedleHaystack> needle;
};

TaskGenerator::TaskGenerator(const Tokenizer& tokenizer, const TaskOptions& options)
    : impl_(std::make_unique<Impl>(tokenizer, options)) {}

TaskGenerator::~TaskGenerator() = default;

const std::vector<std::string>& tasks_with_many_questions() {
  // niah_single_* hold one needle (a second would make them multi-key tasks); cwe and fwe
  // ask the one question their haystack is built for.
  static const std::vector<std::string> tasks = {"niah_multikey_1", "niah_multikey_2", "niah_multikey_3",
                                                 "niah_multivalue", "niah_multiquery", "vt", "qa_1", "qa_2"};
  return tasks;
}

TaskSample TaskGenerator::ruler(std::string_view task, int64_t length, int64_t index) const {
  const int64_t generate = ruler_tokens_to_generate(task);
  if (index < 0) fail("sample numbers start at 0, got {}", index);
  const std::vector<std::string>& many = tasks_with_many_questions();
  if (impl_->options.questions_per_context > 1 && std::find(many.begin(), many.end(), task) == many.end()) {
    fail("{} cannot ask {} different questions over one haystack; the tasks that can: {}", task,
         impl_->options.questions_per_context, fmt::join(many, ", "));
  }
  GeneratedPrompt p;
  try {
    p = impl_->generate(task, length, length - generate, sample_seed(impl_->options.seed, task, length, index), index);
  } catch (const Error& e) {
    fail("{} at {} tokens (with {} to generate): {}", task, length, generate, e.what());
  }
  return {std::string(task), length, index, -1, std::move(p.prompt), std::move(p.tokens), std::move(p.references),
          generate, false, {}, p.context_tokens, std::move(p.turns)};
}

TaskSample TaskGenerator::niah(int64_t length, double depth_percent) const {
  if (impl_->options.questions_per_context > 1) {
    fail("niah holds one needle: it cannot ask {} different questions over one haystack (use RULER's {})",
         impl_->options.questions_per_context, fmt::join(tasks_with_many_questions(), ", "));
  }
  GeneratedPrompt p;
  try {
    p = impl_->needle_haystack().generate(length, depth_percent);
  } catch (const Error& e) {
    fail("niah at {} tokens, depth {}%: {}", length, depth_percent, e.what());
  }
  // 30 new tokens, stopping at end of generation or a newline (KVCache-Factory).
  return {"niah", length, 0, depth_percent, std::move(p.prompt), std::move(p.tokens), std::move(p.references), 30, true,
          {}, p.context_tokens, {}};
}

std::string TaskGenerator::chat_template_name() const { return impl_->prompt.chat_name(); }

}  // namespace deferkv::eval
