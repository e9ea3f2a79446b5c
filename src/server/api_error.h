#pragma once
// An error a request gets back, in OpenAI's shape:
//   {"error": {"message": ..., "type": ..., "param": ..., "code": ...}}
#include <string>

#include <nlohmann/json.hpp>

#include "deferkv/error.h"

namespace deferkv::server {

struct ApiError : Error {
  ApiError(int status, std::string type, std::string param, std::string code, const std::string& message)
      : Error(message), status(status), type(std::move(type)), param(std::move(param)), code(std::move(code)) {}
  int status;
  std::string type;   // "invalid_request_error", "server_error", ...
  std::string param;  // the field at fault ("" when none)
  std::string code;   // "" when none
};

// 400, invalid_request_error, about `param`.
[[noreturn]] inline void bad_request(const std::string& param, const std::string& message,
                                     const std::string& code = "") {
  throw ApiError(400, "invalid_request_error", param, code, message);
}

inline nlohmann::json error_body(const std::string& message, const std::string& type,
                                 const std::string& param, const std::string& code) {
  auto or_null = [](const std::string& s) { return s.empty() ? nlohmann::json() : nlohmann::json(s); };
  return {{"error", {{"message", message}, {"type", type}, {"param", or_null(param)}, {"code", or_null(code)}}}};
}

}  // namespace deferkv::server
