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

class PromptBuilder {
 public:
  PromptBuilder(const Tokenizer& tokenizer, const PromptOptions& options);

  // The task text as the user's turn, the assistant's turn opened, then answer_prefix.
  std::string wrap(std::string_view task_text, std::string_view answer_prefix) const;
  // The ids the model is fed: BOS as the vocabulary asks, chat control tokens parsed
  // when a chat format is in use.
  std::vector<int32_t> encode(std::string_view prompt) const;

  const Tokenizer& tokenizer() const { return tokenizer_; }
  // The chat format's name, "" when prompts are plain text.
  std::string chat_name() const { return chat_ ? chat_->name() : ""; }

 private:
  const Tokenizer& tokenizer_;
  std::optional<ChatTemplate> chat_;
};

}  // namespace deferkv::eval
