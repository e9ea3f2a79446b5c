#pragma once
// The bodies of POST /tokenize and /detokenize (llama.cpp's shapes), read and checked.
// Errors are ApiErrors (400) naming the field.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace deferkv::server {

struct TokenizeRequest {
  std::string content;
  bool add_special = false;  // put the BOS token in front
  bool with_pieces = false;  // answer {id, piece} pairs rather than bare ids
};

// {"content": string, "add_special"?: bool, "with_pieces"?: bool}
TokenizeRequest parse_tokenize_request(const nlohmann::json& body);

// {"tokens": [id, ...]}: the ids, each checked to lie in [0, n_vocab).
std::vector<int32_t> parse_detokenize_request(const nlohmann::json& body, int32_t n_vocab);

}  // namespace deferkv::server
