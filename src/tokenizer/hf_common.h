#pragma once
// Pieces shared by the Hugging Face file readers: JSON and text files,
// tokenizer_config.json, and laying out a vocabulary with its added tokens.
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "tokenizer/vocab.h"

namespace deferkv {

std::string read_text_file(const std::string& path);
nlohmann::json read_json_file(const std::string& path);

struct AddedToken {
  int32_t id;
  std::string content;
  bool special;  // control token; otherwise user-defined
  bool lstrip = false, rstrip = false;
};

// What tokenizer_config.json says; every field optional.
struct HfConfig {
  std::optional<std::string> bos, eos, unk;
  std::optional<bool> add_bos, add_eos;
  std::string chat_template;
  std::string tokenizer_class;
  std::vector<AddedToken> added_tokens;  // from added_tokens_decoder
};

HfConfig read_tokenizer_config(const std::string& path);

// A token id as JSON gives it: Error naming the token and the file unless it is an
// integer that fits an int32 (a float or a larger integer must not be cast).
int32_t json_token_id(const nlohmann::json& id, const std::string& text, const std::string& path);

// One entry of tokenizer.json's added_tokens or tokenizer_config.json's added_tokens_decoder.
AddedToken read_added_token(int32_t id, const nlohmann::json& token);

// Base tokens (spelling -> id) are normal, added tokens control or user-defined; ids
// nobody uses become unused, empty entries. Error on an id clash between spellings.
// (A token listed twice, as added tokens are in tokenizer.json and tokenizer_config.json,
// is fine.)
Vocab layout_vocab(const std::vector<std::pair<std::string, int32_t>>& base,
                   const std::vector<AddedToken>& added, const std::string& path);

// The id of a token spelt `text`, Error naming `what` and the file when there is none.
int32_t require_token(const Vocab& vocab, const std::string& text, const std::string& what,
                      const std::string& path);

// Applies the config's special tokens and BOS/EOS flags to `vocab`.
void apply_config(const HfConfig& config, Vocab& vocab, const std::string& path);

}  // namespace deferkv
