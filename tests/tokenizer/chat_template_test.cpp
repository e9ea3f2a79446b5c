// Chat prompts per family, exactly as the families' official templates write them, and
// recognising the family from the Jinja template a model carries.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "deferkv/chat_template.h"
#include "deferkv/error.h"
#include "deferkv/tokenizer.h"
#include "tokenizer/tokenizer_test_util.h"

namespace deferkv::test {
namespace {

// Characteristic lines of the official templates (what detection looks for).
const std::string kLlama3Jinja =
    "{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ "
    "message['content'] | trim + '<|eot_id|>' %}";
const std::string kQwen2Jinja =
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n' }}{% endif %}"
    "{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
    "{% endfor %}";
const std::string kQwen3Jinja =
    "{{- '<|im_start|>' + message.role + '\\n<think>\\n' + reasoning_content.strip('\\n') + "
    "'\\n</think>\\n\\n' + content.lstrip('\\n') }}";
const std::string kMistralV3Jinja =
    "{%- if loop.last and system_message is defined %}{{- \"[INST] \" + system_message + "
    "\"\\n\\n\" + message[\"content\"] + \"[/INST]\" }}{%- else %}{{- \"[INST] \" + "
    "message[\"content\"] + \"[/INST]\" }}{%- endif %}{{- \" \" + message[\"content\"]|trim + "
    "eos_token}}";

const std::vector<ChatMessage> kChat = {{"system", "You are terse."},
                                        {"user", " Hi there \n"},
                                        {"assistant", "Hello!"},
                                        {"user", "Bye"}};

TEST(ChatTemplate, Llama3) {
  const auto t = ChatTemplate::detect(kLlama3Jinja);
  EXPECT_EQ(t.name(), "llama3");
  EXPECT_EQ(t.apply(kChat, true),
            "<|start_header_id|>system<|end_header_id|>\n\nYou are terse.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHi there<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\nHello!<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nBye<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
  EXPECT_EQ(t.apply({{"user", "Hi"}}, false),
            "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>");
}

TEST(ChatTemplate, ChatmlWithTheTemplatesDefaultSystemMessage) {
  const auto t = ChatTemplate::detect(kQwen2Jinja);
  EXPECT_EQ(t.name(), "chatml");
  EXPECT_EQ(t.apply({{"user", "Hi"}}, true),
            "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  // The chat's own system message replaces the default; contents are not trimmed.
  EXPECT_EQ(
      t.apply(kChat, false),
      "<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\n Hi there \n<|im_end|>\n"
      "<|im_start|>assistant\nHello!<|im_end|>\n<|im_start|>user\nBye<|im_end|>\n");
  // The default written with an escaped newline, as some templates do.
  const auto escaped = ChatTemplate::detect(
      "{{- '<|im_start|>system\\nYou are Qwen.<|im_end|>\\n' }}{{- '<|im_start|>' + message.role "
      "}}");
  EXPECT_EQ(escaped.apply({{"user", "Hi"}}, false),
            "<|im_start|>system\nYou are Qwen.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n");
  // Forced by name: no default system message.
  EXPECT_EQ(ChatTemplate::detect("", "chatml").apply({{"user", "Hi"}}, true),
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
}

TEST(ChatTemplate, Qwen3ThinkBlocks) {
  const auto thinking = ChatTemplate::detect(kQwen3Jinja);
  EXPECT_EQ(thinking.name(), "qwen3");
  const std::vector<ChatMessage> chat = {
      {"user", "2+2?"}, {"assistant", "<think>\nadd them\n</think>\n\n4"}, {"user", "3+3?"}};
  // Reasoning of earlier turns is dropped; only the answer stays.
  const std::string history =
      "<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n4<|im_end|>\n"
      "<|im_start|>user\n3+3?<|im_end|>\n";
  EXPECT_EQ(thinking.apply(chat, true), history + "<|im_start|>assistant\n");
  const auto no_think = ChatTemplate::detect(kQwen3Jinja, "qwen3-no-think");
  EXPECT_EQ(no_think.apply(chat, true), history + "<|im_start|>assistant\n<think>\n\n</think>\n\n");
  // A final assistant turn (being continued) keeps its think block, written afresh.
  EXPECT_EQ(thinking.apply({{"user", "Hi"}, {"assistant", "Hello"}}, false),
            "<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>assistant\n<think>\n\n</think>\n\nHello<|im_end|>\n");
}

TEST(ChatTemplate, MistralV3) {
  const auto t = ChatTemplate::detect(kMistralV3Jinja);
  EXPECT_EQ(t.name(), "mistral-v3");
  // The system message goes in front of the last user message; answers are trimmed.
  const std::vector<ChatMessage> chat = {
      {"system", "Be brief."}, {"user", "Hi"}, {"assistant", " Hello! "}, {"user", "Bye"}};
  EXPECT_EQ(t.apply(chat, true), "[INST] Hi[/INST] Hello!</s>[INST] Be brief.\n\nBye[/INST]");
  EXPECT_EQ(t.apply({{"user", "Hi"}}, false), "[INST] Hi[/INST]");
  EXPECT_THROW(t.apply({{"user", "a"}, {"user", "b"}}, true), Error);
  EXPECT_THROW(t.apply({{"assistant", "a"}}, true), Error);
  EXPECT_THROW(t.apply({{"user", "a"}, {"tool", "b"}}, true), Error);
}

TEST(ChatTemplate, UnknownTemplatesAndNamesAreErrorsListingTheKnownOnes) {
  const auto message = [](const std::string& jinja, const std::string& name) {
    try {
      ChatTemplate::detect(jinja, name);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  const std::string known = "llama3, chatml, qwen3, qwen3-no-think, mistral-v3";
  EXPECT_NE(message("{{ bos_token }}<start_of_turn>user", "").find(known), std::string::npos);
  EXPECT_NE(message("", "").find("carries no chat template"), std::string::npos);
  EXPECT_NE(message(kLlama3Jinja, "vicuna").find("unknown chat template 'vicuna'"),
            std::string::npos);
  // Llama-2 and Mistral v1 / tekken / v7 templates also use [INST] but differ.
  EXPECT_FALSE(message("[INST] <<SYS>>\n' + system + '\n<</SYS>>", "").empty());
  EXPECT_FALSE(message("{{- ' [INST] ' + message['content'] + ' [/INST]' }}", "").empty());
  EXPECT_FALSE(message("{{- \"[INST]\" + message[\"content\"] + \"[/INST]\" }}", "").empty());
  EXPECT_EQ(ChatTemplate::known_names().size(), 5u);
}

TEST(ChatTemplate, FromTheTokenizersFilesAndThroughTheTokenizer) {
  const Tokenizer& t = qwen2();
  const auto chat = ChatTemplate::detect(t);  // tokenizer_config.json's chat_template
  EXPECT_EQ(chat.name(), "chatml");
  const std::string prompt = chat.apply({{"user", "Hi"}}, true);
  EXPECT_EQ(t.encode(prompt, true, true),
            (std::vector<int32_t>{151644, 872, 198, 13048, 151645, 198, 151644, 77091, 198}));
}

}  // namespace
}  // namespace deferkv::test
