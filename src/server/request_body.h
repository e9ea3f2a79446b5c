#pragma once
// The body of a POST request read as JSON. A body that is not JSON is an ApiError (400,
// code invalid_json) quoting the parser's message.
#include <string_view>

#include <nlohmann/json.hpp>

namespace deferkv::server {

nlohmann::json parse_json_body(std::string_view body);

}  // namespace deferkv::server
