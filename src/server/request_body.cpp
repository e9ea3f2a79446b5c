#include "server/request_body.h"

#include <string>

#include "server/api_error.h"

namespace deferkv::server {

nlohmann::json parse_json_body(std::string_view body) {
  try {
    return nlohmann::json::parse(body);
  } catch (const nlohmann::json::exception& e) {
    bad_request("", std::string("the request body is not valid JSON: ") + e.what(), "invalid_json");
  }
}

}  // namespace deferkv::server
