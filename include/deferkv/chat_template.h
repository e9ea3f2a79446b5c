#pragma once
// Chat prompts in the format each model family was trained on. The Jinja template a
// model carries (GGUF `tokenizer.chat_template`, tokenizer_config.json `chat_template`)
// is not run; it is recognised and the family's format is written out by hand:
//   llama3          Llama-3.x: <|start_header_id|>role<|end_header_id|>\n\n text <|eot_id|>
//                   (contents trimmed; no "Cutting Knowledge Date" system block)
//   chatml          Qwen2/Qwen2.5: <|im_start|>role\n text <|im_end|>\n, with the
//                   template's default system message when it has one
//   qwen3           ChatML with Qwen3's think handling (thinking on)
//   qwen3-no-think  the same with the empty <think>\n\n</think>\n\n block Qwen3 uses
//                   when thinking is off (enable_thinking=false)
//   mistral-v3      Mistral v0.3: [INST] text[/INST] answer</s>, system message put in
//                   front of the last user message, roles must alternate
// The prompt never holds BOS: encode it with add_special=true (the tokenizer adds BOS
// when the vocabulary asks) and parse_special=true.
#include <string>
#include <vector>

namespace deferkv {

class Tokenizer;

struct ChatMessage {
  std::string role;  // "system", "user", "assistant"
  std::string content;
};

class ChatTemplate {
 public:
  // The template named `forced_name`, or, when that is empty, the one recognised in the
  // model's Jinja template. Error listing the known names when the name is unknown, the
  // Jinja template is not recognised, or there is none.
  static ChatTemplate detect(const Tokenizer& tokenizer, const std::string& forced_name = "");
  static ChatTemplate detect(const std::string& jinja_template,
                             const std::string& forced_name = "");
  static std::vector<std::string> known_names();

  // Error when the messages break the family's rules (Mistral: alternating roles).
  std::string apply(const std::vector<ChatMessage>& messages, bool add_generation_prompt) const;
  const std::string& name() const { return name_; }

 private:
  ChatTemplate(std::string name, std::string default_system);

  std::string name_;
  std::string default_system_;  // chatml: system message used when the chat has none
};

}  // namespace deferkv
