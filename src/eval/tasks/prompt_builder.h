#pragma once
// The text a model reads for a task, and its length in the model's own tokens. RULER's
// "full template" is the model's chat format around the task text, then the answer
// prefix the model continues; without a chat format it is the task text and the prefix.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "deferkv/chat_template.h"
#include "deferkv/eval_tasks.h"

namespace deferkv {
class Tokenizer;
}

namespace deferkv::eval {

// A prompt and where its context part ends (question-agnostic mode compresses
// text[0, context_end) before reading the rest).
struct SplitPrompt {
  std::string text;
  size_t context_end = 0;
};

// The number of leading ids of `tokens` (the whole prompt's) that the context part alone
// encodes to (`context_tokens`): a token merging across the split goes to the question.
int64_t shared_prefix_length(const std::vector<int32_t>& tokens, const std::vector<int32_t>& context_tokens);

// Where content[0, context_end) ends in `chat_text`, a chat format's text whose last user
// turn holds `content` (the format may trim the content's ends, as llama3 does).
size_t context_end_in_chat(std::string_view chat_text, std::string_view content, size_t context_end);

class PromptBuilder {
 public:
  PromptBuilder(const Tokenizer& tokenizer, const PromptOptions& options);

  // The task text as the user's turn, the assistant's turn opened, then answer_prefix.
  // task_text[0, context_end) is the context part: the split stays inside the user's turn
  // (the chat format's opening goes with the context; its closing, the assistant's opening
  // and the answer prefix with the question).
  SplitPrompt wrap(std::string_view task_text, size_t context_end, std::string_view answer_prefix) const;
  // The ids the model is fed: BOS as the vocabulary asks, chat control tokens parsed
  // when a chat format is in use.
  std::vector<int32_t> encode(std::string_view prompt) const;
  // How many of `tokens` (encode(prompt.text)) are the context part's.
  int64_t context_tokens(const SplitPrompt& prompt, const std::vector<int32_t>& tokens) const;

  const Tokenizer& tokenizer() const { return tokenizer_; }
  // The chat format's name, "" when prompts are plain text.
  std::string chat_name() const { return chat_ ? chat_->name() : ""; }

 private:
  const Tokenizer& tokenizer_;
  std::optional<ChatTemplate> chat_;
};

}  // namespace deferkv::eval
