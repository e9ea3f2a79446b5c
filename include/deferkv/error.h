#pragma once
// The one error type of deferkv. Library code throws it (never exits or aborts);
// the CLI and the server catch it and turn it into an exit code or an HTTP status.
#include <stdexcept>
#include <string>

#include <fmt/format.h>

namespace deferkv {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

// Throws an Error whose message is formatted with fmt.
template <typename... Args>
[[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) {
  throw Error(fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace deferkv
