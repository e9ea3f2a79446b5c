#pragma once
// Runs the built `deferkv` CLI through the shell (so arguments may quote and redirect)
// and returns its exit status and standard output.
#include <string>

namespace deferkv::testing {

struct CliResult {
  int status;
  std::string output;
};

CliResult run_cli(const std::string& arguments);

}  // namespace deferkv::testing
