// LongBench rows turned into model prompts as pred.py does: fill the template, cut the
// middle out on tokens, decode the two halves, then put the text in the chat format
// (unless the dataset is exempt) and tokenize it again.
#include <algorithm>
#include <iterator>

#include "deferkv/error.h"
#include "deferkv/eval_longbench.h"
#include "deferkv/tokenizer.h"
#include "eval/tasks/prompt_builder.h"

namespace deferkv::eval {
namespace {

// tokenizer.decode(ids, skip_special_tokens=True).
std::string decode_without_control(const Tokenizer& tokenizer, std::span<const int32_t> ids) {
  std::vector<int32_t> kept;
  std::copy_if(ids.begin(), ids.end(), std::back_inserter(kept),
               [&](int32_t id) { return tokenizer.token_kind(id) != TokenKind::kControl; });
  return tokenizer.decode(kept);
}

}  // namespace

struct LongBenchSet::Impl {
  const Tokenizer& tokenizer;
  PromptBuilder builder;
  LongBenchConfig config;
  std::vector<std::string> datasets;
  std::map<std::string, std::vector<LongBenchRow>, std::less<>> rows;
  std::map<std::string, int64_t, std::less<>> max_lengths;
};

LongBenchSet::LongBenchSet(const Tokenizer& tokenizer, int64_t n_ctx_train, const LongBenchOptions& options)
    : impl_(std::make_unique<Impl>(Impl{tokenizer, PromptBuilder(tokenizer, options.prompt),
                                        LongBenchConfig::load(options.config_dir), {}, {}, {}})) {
  impl_->datasets = options.datasets;
  if (impl_->datasets.empty()) {
    for (std::string_view d : longbench_english_datasets()) impl_->datasets.emplace_back(d);
  }
  for (const std::string& dataset : impl_->datasets) {
    impl_->config.prompt_template(dataset);  // known to the configuration, or an error naming it
    const int64_t new_tokens = impl_->config.max_new_tokens(dataset);
    const int64_t max_length = options.max_length > 0 ? options.max_length : n_ctx_train - new_tokens;
    if (max_length < 2) {
      fail("{}: the model's context of {} tokens leaves no room for a prompt before {} new tokens; give --max-length",
           dataset, n_ctx_train, new_tokens);
    }
    impl_->max_lengths[dataset] = max_length;
    impl_->rows[dataset] = read_longbench_file(options.data_dir + "/" + dataset + ".jsonl", options.samples);
  }
}

LongBenchSet::~LongBenchSet() = default;

const std::vector<std::string>& LongBenchSet::datasets() const { return impl_->datasets; }

int64_t LongBenchSet::rows(std::string_view dataset) const {
  const auto it = impl_->rows.find(dataset);
  if (it == impl_->rows.end()) fail("LongBench dataset '{}' was not loaded", dataset);
  return static_cast<int64_t>(it->second.size());
}

int64_t LongBenchSet::max_length(std::string_view dataset) const {
  const auto it = impl_->max_lengths.find(dataset);
  if (it == impl_->max_lengths.end()) fail("LongBench dataset '{}' was not loaded", dataset);
  return it->second;
}

const LongBenchRow& LongBenchSet::row(std::string_view dataset, int64_t index) const {
  if (index < 0 || index >= rows(dataset)) fail("{} has no row {}", dataset, index);
  return impl_->rows.find(dataset)->second[static_cast<size_t>(index)];
}

TaskSample LongBenchSet::sample(std::string_view dataset, int64_t index) const {
  const LongBenchRow& r = row(dataset, index);
  const Tokenizer& tokenizer = impl_->tokenizer;
  const std::string& prompt_template = impl_->config.prompt_template(dataset);
  std::string prompt = fill_longbench_prompt(prompt_template, r);
  // What follows the context in the template, filled (one pass: it is the prompt's end).
  constexpr std::string_view kContextField = "{context}";
  const size_t context_field = prompt_template.rfind(kContextField);
  const std::string after_context =
      context_field == std::string::npos
          ? prompt
          : fill_longbench_prompt(std::string_view(prompt_template).substr(context_field + kContextField.size()), r);
  const int64_t max_length = this->max_length(dataset);
  const std::vector<int32_t> ids = tokenizer.encode(prompt, true, false);
  if (static_cast<int64_t>(ids.size()) > max_length) {
    const std::vector<int32_t> kept = middle_truncate(ids, max_length);
    const std::span<const int32_t> all(kept);
    const size_t half = kept.size() / 2;
    prompt = decode_without_control(tokenizer, all.first(half)) + decode_without_control(tokenizer, all.subspan(half));
  }
  const bool chat = longbench_uses_chat(dataset) && !impl_->builder.chat_name().empty();
  // A truncation that cut into the question leaves the prompt without a question part.
  const size_t context_end = prompt.ends_with(after_context) ? prompt.size() - after_context.size() : prompt.size();
  const SplitPrompt split = chat ? impl_->builder.wrap(prompt, context_end, "") : SplitPrompt{prompt, context_end};

  TaskSample s;
  s.task = std::string(dataset);
  s.target_length = max_length;
  s.index = index;
  s.prompt = split.text;
  s.tokens = tokenizer.encode(s.prompt, true, chat);
  s.context_tokens = shared_prefix_length(s.tokens, tokenizer.encode(s.prompt.substr(0, split.context_end), true, chat));
  s.references = r.answers;
  s.all_classes = r.all_classes;
  s.max_new_tokens = impl_->config.max_new_tokens(dataset);
  s.stop_at_newline = dataset == "samsum";
  return s;
}

std::string LongBenchSet::chat_template_name() const { return impl_->builder.chat_name(); }

}  // namespace deferkv::eval
