#include "eval/tasks/prompt_builder.h"

#include <algorithm>

#include "deferkv/error.h"
#include "deferkv/tokenizer.h"
#include "eval/tasks/template_text.h"

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

SplitPrompt PromptBuilder::wrap(std::string_view task_text, size_t context_end, std::string_view answer_prefix) const {
  SplitPrompt out{std::string(task_text), std::min(context_end, task_text.size())};
  if (chat_) {
    out.text = chat_->apply({{"user", std::string(task_text)}}, true);
    out.context_end = context_end_in_chat(out.text, task_text, out.context_end);
  }
  out.text.append(answer_prefix);
  return out;
}

std::vector<int32_t> PromptBuilder::encode(std::string_view prompt) const {
  return tokenizer_.encode(prompt, true, chat_.has_value());
}

int64_t PromptBuilder::context_tokens(const SplitPrompt& prompt, const std::vector<int32_t>& tokens) const {
  return shared_prefix_length(tokens, encode(std::string_view(prompt.text).substr(0, prompt.context_end)));
}

size_t context_end_in_chat(std::string_view chat_text, std::string_view content, size_t context_end) {
  // The stripped content is in the text (its last occurrence: the last turn); the context
  // ends at the same distance from its start.
  const std::string_view body = strip(content);
  const size_t at = chat_text.rfind(body);
  if (at == std::string_view::npos) fail("internal: the chat format's text does not hold the user's message");
  const size_t lead = static_cast<size_t>(body.data() - content.data());
  return at + std::clamp(std::min(context_end, content.size()), lead, lead + body.size()) - lead;
}

int64_t shared_prefix_length(const std::vector<int32_t>& tokens, const std::vector<int32_t>& context_tokens) {
  const auto [a, b] = std::mismatch(tokens.begin(), tokens.end(), context_tokens.begin(), context_tokens.end());
  return a - tokens.begin();
}

}  // namespace deferkv::eval
