// Chat templates: recognising a model's Jinja template (or one forced by name) and
// writing a chat in its format. The input is
//   <flags> <Jinja template> NUL <forced name> NUL <role> NUL <content> NUL <role> ...
// (flags & 1: add the generation prompt). Asserts: only deferkv::Error escapes; a
// recognised template has a known name; every user message's longest run of ASCII
// letters and digits is in the prompt (families trim contents or move the system
// message, but none drops what the user said).
#include <algorithm>
#include <cctype>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "deferkv/chat_template.h"
#include "fuzz_support.h"

using namespace deferkv;

namespace {

std::string_view longest_alnum_run(std::string_view text) {
  std::string_view best;
  size_t start = 0;
  for (size_t i = 0; i <= text.size(); ++i) {
    if (i < text.size() && std::isalnum(static_cast<unsigned char>(text[i]))) continue;
    if (i - start > best.size()) best = text.substr(start, i - start);
    start = i + 1;
  }
  return best;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const bool add_generation_prompt = (data[0] & 1) != 0;
  const auto fields = fuzz::split_fields(fuzz::as_text(data + 1, size - 1));
  const std::string jinja(fields[0]);
  const std::string forced = fields.size() > 1 ? std::string(fields[1]) : "";
  std::vector<ChatMessage> chat;
  for (size_t i = 2; i + 1 < fields.size(); i += 2) {
    chat.push_back({std::string(fields[i]), std::string(fields[i + 1])});
  }
  fuzz::accepts([&] {
    const ChatTemplate chat_template = ChatTemplate::detect(jinja, forced);
    const auto names = ChatTemplate::known_names();
    fuzz::require(std::find(names.begin(), names.end(), chat_template.name()) != names.end(),
                  "a recognised template has a known name");
    const std::string prompt = chat_template.apply(chat, add_generation_prompt);
    for (const ChatMessage& message : chat) {
      if (message.role != "user") continue;
      fuzz::require(prompt.find(longest_alnum_run(message.content)) != std::string::npos,
                    "the prompt holds what each user message says");
    }
  });
  return 0;
}
