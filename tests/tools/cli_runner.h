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
// Any shell command line (/bin/sh), e.g. one that starts the CLI in the background.
CliResult run_shell(const std::string& command);

}  // namespace deferkv::testing
