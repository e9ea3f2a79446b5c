#include "deferkv/chat_template.h"

#include <fmt/format.h>

#include "deferkv/error.h"
#include "deferkv/tokenizer.h"
#include "tokenizer/chat_formats.h"

namespace deferkv {
namespace {

// Which family a Jinja template is, from the markers only that family's templates hold;
// "" when none fits.
std::string recognise(const std::string& jinja) {
  const auto has = [&](std::string_view marker) { return jinja.find(marker) != std::string::npos; };
  if (has("<|start_header_id|>") && has("<|end_header_id|>")) return "llama3";
  if (has("<|im_start|>")) return has("<think>") ? "qwen3" : "chatml";
  // Mistral v0.3 writes "[INST] " + content; v1 (" [INST] "), v3-tekken ("[INST]" with no
  // space), v7 ([SYSTEM_PROMPT]) and Llama-2 (<<SYS>>) differ and are not supported.
  const bool v3_opening = has("\"[INST] \"") || has("'[INST] '");
  const bool other =
      has("[SYSTEM_PROMPT]") || has("<<SYS>>") || has("\" [INST]") || has("' [INST]");
  if (v3_opening && !other) return "mistral-v3";
  return "";
}

// The system message a ChatML template writes when the chat has none, e.g. Qwen2's
// "You are a helpful assistant.": a literal '<|im_start|>system\n...<|im_end|>' in it.
std::string chatml_default_system(const std::string& jinja) {
  static constexpr std::string_view kOpen = "<|im_start|>system";
  for (size_t pos = jinja.find(kOpen); pos != std::string::npos; pos = jinja.find(kOpen, pos + 1)) {
    size_t start = pos + kOpen.size();
    if (jinja.compare(start, 1, "\n") == 0) {
      start += 1;
    } else if (jinja.compare(start, 2, "\\n") == 0) {  // written as an escape in the template
      start += 2;
    } else {
      continue;
    }
    const size_t end = jinja.find("<|im_end|>", start);
    if (end == std::string::npos || end == start) continue;
    const std::string text = jinja.substr(start, end - start);
    // Only a plain literal: an expression (quotes, +, braces) is the chat's own system message.
    if (text.find_first_of("'\"+{}") == std::string::npos) return text;
  }
  return "";
}

void check_name(const std::string& name) {
  for (const auto& known : ChatTemplate::known_names()) {
    if (known == name) return;
  }
  fail("unknown chat template '{}'; known: {}", name, fmt::join(ChatTemplate::known_names(), ", "));
}

}  // namespace

ChatTemplate::ChatTemplate(std::string name, std::string default_system)
    : name_(std::move(name)), default_system_(std::move(default_system)) {}

std::vector<std::string> ChatTemplate::known_names() {
  return {"llama3", "chatml", "qwen3", "qwen3-no-think", "mistral-v3"};
}

ChatTemplate ChatTemplate::detect(const Tokenizer& tokenizer, const std::string& forced_name) {
  return detect(tokenizer.chat_template(), forced_name);
}

ChatTemplate ChatTemplate::detect(const std::string& jinja_template,
                                  const std::string& forced_name) {
  std::string name = forced_name;
  if (name.empty()) {
    if (jinja_template.empty()) {
      fail("the model carries no chat template; choose one of: {}", fmt::join(known_names(), ", "));
    }
    name = recognise(jinja_template);
    if (name.empty()) {
      fail("the model's chat template is not one deferkv knows; choose one of: {}",
           fmt::join(known_names(), ", "));
    }
  }
  check_name(name);
  return ChatTemplate(name, name == "chatml" ? chatml_default_system(jinja_template) : "");
}

std::string ChatTemplate::apply(const std::vector<ChatMessage>& messages,
                                bool add_generation_prompt) const {
  if (name_ == "llama3") return format_llama3(messages, add_generation_prompt);
  if (name_ == "chatml") return format_chatml(messages, add_generation_prompt, default_system_);
  if (name_ == "qwen3") return format_qwen3(messages, add_generation_prompt, true);
  if (name_ == "qwen3-no-think") return format_qwen3(messages, add_generation_prompt, false);
  return format_mistral_v3(messages);
}

}  // namespace deferkv
