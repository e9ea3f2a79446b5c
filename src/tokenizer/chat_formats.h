#pragma once
// The prompt formats ChatTemplate writes, one function per model family, each written
// to give the same text as that family's official Jinja template.
#include <string>
#include <vector>

#include "deferkv/chat_template.h"

namespace deferkv {

std::string format_llama3(const std::vector<ChatMessage>& messages, bool add_generation_prompt);
std::string format_chatml(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                          const std::string& default_system);
std::string format_qwen3(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                         bool thinking);
// Mistral's prompt ends with [/INST] either way: there is no generation prompt to add.
std::string format_mistral_v3(const std::vector<ChatMessage>& messages);

}  // namespace deferkv
