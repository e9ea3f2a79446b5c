#include "eval/tasks/prompt_builder.h"

#include "deferkv/error.h"
#include "deferkv/tokenizer.h"

namespace deferkv::eval {
namespace {

std::optional<ChatTemplate> chat_format(const Tokenizer& tokenizer, const PromptOptions& options) {
  if (!options.chat) return std::nullopt;
  if (options.chat_template.empty() && tokenizer.chat_template().empty()) return std::nullopt;
  try {
    return ChatTemplate::detect(tokenizer, options.chat_template);
  } catch (const Error& e) {
    fail("{} (name one with --chat-template, or use plain prompts with --no-chat-template)", e.what());
  }
}

}  // namespace

PromptBuilder::PromptBuilder(const Tokenizer& tokenizer, const PromptOptions& options)
    : tokenizer_(tokenizer), chat_(chat_format(tokenizer, options)) {}

std::string PromptBuilder::wrap(std::string_view task_text, std::string_view answer_prefix) const {
  std::string text = chat_ ? chat_->apply({{"user", std::string(task_text)}}, true) : std::string(task_text);
  text.append(answer_prefix);
  return text;
}

std::vector<int32_t> PromptBuilder::encode(std::string_view prompt) const {
  return tokenizer_.encode(prompt, true, chat_.has_value());
}

}  // namespace deferkv::eval
