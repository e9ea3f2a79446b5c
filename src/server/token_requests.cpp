#include "server/token_requests.h"

#include <fmt/format.h>

#include "server/api_error.h"

namespace deferkv::server {

using nlohmann::json;

TokenizeRequest parse_tokenize_request(const json& body) {
  if (!body.is_object() || !body.contains("content") || !body["content"].is_string()) {
    bad_request("content", "'content' must be a string");
  }
  auto flag = [&](const char* name) {
    if (!body.contains(name)) return false;
    if (!body[name].is_boolean()) bad_request(name, fmt::format("'{}' must be true or false", name));
    return body[name].get<bool>();
  };
  TokenizeRequest r;
  r.content = body["content"].get<std::string>();
  r.add_special = flag("add_special");
  r.with_pieces = flag("with_pieces");
  return r;
}

std::vector<int32_t> parse_detokenize_request(const json& body, int32_t n_vocab) {
  if (!body.is_object() || !body.contains("tokens") || !body["tokens"].is_array()) {
    bad_request("tokens", "'tokens' must be a list of token ids");
  }
  std::vector<int32_t> ids;
  for (const json& t : body["tokens"]) {
    if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= n_vocab) {
      bad_request("tokens", fmt::format("each token must be an id in [0, {})", n_vocab));
    }
    ids.push_back(static_cast<int32_t>(t.get<int64_t>()));
  }
  return ids;
}

}  // namespace deferkv::server
