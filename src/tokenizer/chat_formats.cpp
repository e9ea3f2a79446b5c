#include "tokenizer/chat_formats.h"

#include "deferkv/error.h"

namespace deferkv {
namespace {

constexpr std::string_view kWhitespace = " \t\n\r\v\f";

std::string_view trim(std::string_view text) {
  const size_t first = text.find_first_not_of(kWhitespace);
  if (first == std::string_view::npos) return {};
  return text.substr(first, text.find_last_not_of(kWhitespace) - first + 1);
}

std::string_view strip_newlines_left(std::string_view text) {
  while (text.starts_with('\n')) text.remove_prefix(1);
  return text;
}

std::string_view strip_newlines_right(std::string_view text) {
  while (text.ends_with('\n')) text.remove_suffix(1);
  return text;
}

void append_chatml_turn(std::string& out, const std::string& role, std::string_view content) {
  out += "<|im_start|>";
  out += role;
  out += '\n';
  out += content;
  out += "<|im_end|>\n";
}

// Qwen3 splits an assistant message at its </think>: the reasoning between <think> and
// the first </think>, and the answer after the last one.
struct ThinkSplit {
  std::string_view reasoning, answer;
  bool had_think;
};

ThinkSplit split_think(std::string_view content) {
  const size_t first_close = content.find("</think>");
  if (first_close == std::string_view::npos) return {{}, content, false};
  std::string_view reasoning = strip_newlines_right(content.substr(0, first_close));
  if (const size_t open = reasoning.rfind("<think>"); open != std::string_view::npos) {
    reasoning = reasoning.substr(open + 7);
  }
  const size_t last_close = content.rfind("</think>");
  return {strip_newlines_left(reasoning), strip_newlines_left(content.substr(last_close + 8)),
          true};
}

}  // namespace

std::string format_llama3(const std::vector<ChatMessage>& messages, bool add_generation_prompt) {
  std::string out;
  for (const ChatMessage& m : messages) {
    out += "<|start_header_id|>" + m.role + "<|end_header_id|>\n\n";
    out += trim(m.content);
    out += "<|eot_id|>";
  }
  if (add_generation_prompt) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
  return out;
}

std::string format_chatml(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                          const std::string& default_system) {
  std::string out;
  if (!default_system.empty() && (messages.empty() || messages.front().role != "system")) {
    append_chatml_turn(out, "system", default_system);
  }
  for (const ChatMessage& m : messages) append_chatml_turn(out, m.role, m.content);
  if (add_generation_prompt) out += "<|im_start|>assistant\n";
  return out;
}

std::string format_qwen3(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                         bool thinking) {
  // Reasoning is kept only for assistant turns after the last user message (the turn
  // being continued); earlier turns keep just their answers.
  size_t last_user = messages.empty() ? 0 : messages.size() - 1;
  for (size_t i = messages.size(); i-- > 0;) {
    if (messages[i].role == "user") {
      last_user = i;
      break;
    }
  }
  std::string out;
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (m.role != "assistant") {
      append_chatml_turn(out, m.role, m.content);
      continue;
    }
    const ThinkSplit parts = split_think(m.content);
    const bool last = i + 1 == messages.size();
    if (i > last_user && (last || !parts.reasoning.empty())) {
      out += "<|im_start|>assistant\n<think>\n";
      out += strip_newlines_right(strip_newlines_left(parts.reasoning));
      out += "\n</think>\n\n";
      out += strip_newlines_left(parts.answer);
      out += "<|im_end|>\n";
    } else {
      append_chatml_turn(out, m.role, parts.answer);
    }
  }
  if (add_generation_prompt) {
    out += "<|im_start|>assistant\n";
    if (!thinking) out += "<think>\n\n</think>\n\n";
  }
  return out;
}

std::string format_mistral_v3(const std::vector<ChatMessage>& messages) {
  const bool has_system = !messages.empty() && messages.front().role == "system";
  const size_t first = has_system ? 1 : 0;
  for (size_t i = first; i < messages.size(); ++i) {
    const std::string& role = messages[i].role;
    if (role != "user" && role != "assistant") {
      fail(
          "mistral-v3 chat template: only user and assistant roles are supported after an "
          "optional first system message, not '{}'",
          role);
    }
    if ((role == "user") != ((i - first) % 2 == 0)) {
      fail(
          "mistral-v3 chat template: after the optional system message, roles must alternate "
          "user/assistant/user/assistant/...");
    }
  }
  std::string out;
  for (size_t i = first; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (m.role == "user") {
      // The system message goes in front of the last message, if that is a user one.
      const bool with_system = has_system && i + 1 == messages.size();
      out += "[INST] ";
      if (with_system) out += messages.front().content + "\n\n";
      out += m.content + "[/INST]";
    } else {
      out += " ";
      out += trim(m.content);
      out += "</s>";
    }
  }
  return out;
}

}  // namespace deferkv
