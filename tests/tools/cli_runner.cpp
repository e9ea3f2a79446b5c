#include "tools/cli_runner.h"

#include <sys/wait.h>

#include <cstdio>
#include <stdexcept>

namespace deferkv::testing {

CliResult run_cli(const std::string& arguments) { return run_shell(std::string("'") + DEFERKV_CLI + "' " + arguments); }

CliResult run_shell(const std::string& command) {
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) throw std::runtime_error("cannot run " + command);
  CliResult result{0, ""};
  char buffer[4096];
  for (size_t n; (n = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0;) result.output.append(buffer, n);
  const int status = ::pclose(pipe);
  result.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

}  // namespace deferkv::testing
