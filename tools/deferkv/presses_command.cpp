// `deferkv presses`: every KV-compression method with its parameters and defaults.
#include <fmt/format.h>

#include "commands.h"
#include "deferkv/press.h"

namespace deferkv::cli {

void add_presses_command(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand("presses", "List the KV-cache compression methods and their parameters");
  cmd->callback([] {
    for (const PressInfo& info : press_catalogue()) {
      fmt::print("{}\n  {}\n  paper: {}\n", info.name, info.summary, info.paper);
      for (const PressParameter& p : info.parameters) {
        fmt::print("  {:<22} {:<8} {}\n", p.name + "=", p.default_value, p.help);
      }
      fmt::print("\n");
    }
    fmt::print("Use: --press NAME[:key=value,...] with --kv-budget N (entries per KV head per layer)\n"
               "     or --kv-ratio R (fraction of the prompt's entries evicted).\n");
  });
}

}  // namespace deferkv::cli
