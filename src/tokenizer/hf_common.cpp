#include "tokenizer/hf_common.h"

#include <cstdint>
#include <fstream>

#include "deferkv/error.h"

namespace deferkv {
namespace {

// bos_token and friends are a string, null, or {"content": "...", ...}.
std::optional<std::string> token_field(const nlohmann::json& config, const char* key) {
  const auto it = config.find(key);
  if (it == config.end() || it->is_null()) return std::nullopt;
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content")) return it->at("content").get<std::string>();
  return std::nullopt;
}

std::optional<bool> bool_field(const nlohmann::json& config, const char* key) {
  const auto it = config.find(key);
  if (it == config.end() || !it->is_boolean()) return std::nullopt;
  return it->get<bool>();
}

// chat_template is a string, or a list of {"name", "template"} of which "default" is used.
std::string chat_template_field(const nlohmann::json& config) {
  const auto it = config.find("chat_template");
  if (it == config.end()) return "";
  if (it->is_string()) return it->get<std::string>();
  if (it->is_array()) {
    for (const auto& entry : *it) {
      if (entry.value("name", "") == "default") return entry.value("template", "");
    }
  }
  return "";
}

}  // namespace

std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) fail("{}: cannot open the file", path);
  std::string text(static_cast<size_t>(in.tellg()), '\0');
  in.seekg(0);
  if (!in.read(text.data(), static_cast<std::streamsize>(text.size()))) {
    fail("{}: read error", path);
  }
  return text;
}

nlohmann::json read_json_file(const std::string& path) {
  try {
    return nlohmann::json::parse(read_text_file(path));
  } catch (const nlohmann::json::exception& e) {
    fail("{}: not valid JSON: {}", path, e.what());
  }
}

HfConfig read_tokenizer_config(const std::string& path) {
  const nlohmann::json config = read_json_file(path);
  if (!config.is_object()) fail("{}: expected a JSON object", path);
  HfConfig out;
  try {
    out.bos = token_field(config, "bos_token");
    out.eos = token_field(config, "eos_token");
    out.unk = token_field(config, "unk_token");
    out.add_bos = bool_field(config, "add_bos_token");
    out.add_eos = bool_field(config, "add_eos_token");
    out.chat_template = chat_template_field(config);
    out.tokenizer_class = config.value("tokenizer_class", "");
    if (const auto it = config.find("added_tokens_decoder"); it != config.end()) {
      for (const auto& [id, token] : it->items()) {
        out.added_tokens.push_back(read_added_token(std::stoi(id), token));
      }
    }
  } catch (const std::exception& e) {  // a field of the wrong type, or an id that is no number
    fail("{}: unexpected content: {}", path, e.what());
  }
  return out;
}

int32_t json_token_id(const nlohmann::json& id, const std::string& text, const std::string& path) {
  const bool fits = (id.is_number_unsigned() && id.get<uint64_t>() <= INT32_MAX) ||
                    (id.is_number_integer() && !id.is_number_unsigned() && id.get<int64_t>() >= INT32_MIN &&
                     id.get<int64_t>() <= INT32_MAX);
  if (!fits) fail("{}: the id of '{}' is {}, not an integer token id", path, text, id.dump());
  return static_cast<int32_t>(id.get<int64_t>());
}

AddedToken read_added_token(int32_t id, const nlohmann::json& token) {
  return {id, token.at("content").get<std::string>(), token.value("special", false),
          token.value("lstrip", false), token.value("rstrip", false)};
}

Vocab layout_vocab(const std::vector<std::pair<std::string, int32_t>>& base,
                   const std::vector<AddedToken>& added, const std::string& path) {
  int32_t max_id = -1;
  for (const auto& [text, id] : base) max_id = std::max(max_id, id);
  for (const auto& token : added) max_id = std::max(max_id, token.id);
  if (max_id < 0) fail("{}: the vocabulary is empty", path);
  // Ids are dense in real files; a stray huge id must not make us allocate for it.
  const size_t n_tokens = base.size() + added.size();
  if (static_cast<size_t>(max_id) >= 2 * n_tokens + 1024) {
    fail("{}: token ids go up to {} for only {} tokens", path, max_id, n_tokens);
  }
  Vocab vocab;
  vocab.texts.assign(static_cast<size_t>(max_id) + 1, "");
  vocab.kinds.assign(static_cast<size_t>(max_id) + 1, TokenKind::kUnused);
  vocab.lstrip.assign(vocab.texts.size(), false);
  vocab.rstrip.assign(vocab.texts.size(), false);
  const auto place = [&](int32_t id, const std::string& text, TokenKind kind) {
    if (id < 0) fail("{}: token '{}' has a negative id {}", path, text, id);
    if (vocab.kinds[id] != TokenKind::kUnused && vocab.texts[id] != text) {
      fail("{}: id {} is given to both '{}' and '{}'", path, id, vocab.texts[id], text);
    }
    vocab.texts[id] = text;
    vocab.kinds[id] = kind;
  };
  for (const auto& [text, id] : base) place(id, text, TokenKind::kNormal);
  for (const auto& token : added) {
    place(token.id, token.content, token.special ? TokenKind::kControl : TokenKind::kUserDefined);
    vocab.lstrip[token.id] = token.lstrip;
    vocab.rstrip[token.id] = token.rstrip;
  }
  return vocab;
}

int32_t require_token(const Vocab& vocab, const std::string& text, const std::string& what,
                      const std::string& path) {
  for (int32_t id = 0; id < vocab.size(); ++id) {
    if (vocab.kinds[id] != TokenKind::kUnused && vocab.texts[id] == text) return id;
  }
  fail("{}: {} '{}' is not in the vocabulary", path, what, text);
}

void apply_config(const HfConfig& config, Vocab& vocab, const std::string& path) {
  if (config.bos) vocab.bos = require_token(vocab, *config.bos, "bos_token", path);
  if (config.eos) vocab.eos = require_token(vocab, *config.eos, "eos_token", path);
  if (config.unk) vocab.unk = require_token(vocab, *config.unk, "unk_token", path);
  if (config.add_bos) vocab.add_bos = *config.add_bos;
  if (config.add_eos) vocab.add_eos = *config.add_eos;
  if (!config.chat_template.empty()) vocab.chat_template = config.chat_template;
}

}  // namespace deferkv
