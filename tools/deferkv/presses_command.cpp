// `deferkv presses`: the methods grouped by what they read, one line each (thirty-odd
// methods do not fit a screen with their parameters); `deferkv presses NAME...` a method's
// parameters and defaults; `--all` every method's.
#include <algorithm>
#include <cctype>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "commands.h"
#include "deferkv/error.h"
#include "deferkv/press.h"

namespace deferkv::cli {
namespace {

// A scorer method takes the shared parts (scored_press.h): its parameters hold alloc=.
bool is_scorer(const PressInfo& info) {
  return std::any_of(info.parameters.begin(), info.parameters.end(),
                     [](const PressParameter& p) { return p.name == "alloc"; });
}

void print_method(const PressInfo& info) {
  fmt::print("{}{}\n  {}\n  paper: {}\n  reads: {}\n", info.name, is_scorer(info) ? " (scorer)" : "", info.summary,
             info.paper, press_reads_heading(info.reads));
  for (const PressParameter& p : info.parameters) fmt::print("  {:<22} {:<8} {}\n", p.name + "=", p.default_value, p.help);
  fmt::print("\n");
}

void print_groups() {
  fmt::print(
      "KV-cache compression methods, by what they read. A scorer (*) takes every allocation\n"
      "(alloc=), selection (chunk=) and trigger (d=, per_step=, every=; ratio_of=seen: kvpress's\n"
      "CompressionRatioDecodingPress); a scorer of keys and values also takes the prompt in\n"
      "pieces (block=: BlockPress, segment=: ChunkPress). `deferkv presses NAME` lists a method's\n"
      "parameters; docs/methods/NAME.md explains it.\n");
  std::map<PressReads, std::vector<const PressInfo*>> groups;
  for (const PressInfo& info : press_catalogue()) groups[info.reads].push_back(&info);
  size_t width = 0;  // the longest name and its star, so that the summaries line up
  for (const PressInfo& info : press_catalogue()) width = std::max(width, info.name.size() + 2);
  for (const auto& [reads, members] : groups) {
    std::string heading = press_reads_heading(reads);
    heading[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(heading[0])));
    fmt::print("\n{}\n", heading);
    for (const PressInfo* info : members) {
      fmt::print("  {:<{}} {}\n", info->name + (is_scorer(*info) ? " *" : ""), width, info->summary);
    }
  }
  fmt::print(
      "\nCombine two with '+' where their roles allow (e.g. snapkv+moment_kv; docs/compression.md).\n"
      "Use: --press NAME[:key=value,...] with --kv-budget N (entries per KV head per layer)\n"
      "     or --kv-ratio R (fraction of the prompt's entries evicted).\n");
}

}  // namespace

struct PressesArgs {
  std::vector<std::string> names;
  bool all = false;
};

void add_presses_command(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand("presses", "List the KV-cache compression methods, grouped, or one method's parameters");
  auto args = std::make_shared<PressesArgs>();
  cmd->add_option("names", args->names, "methods whose parameters and defaults to show");
  cmd->add_flag("--all", args->all, "every method's parameters and defaults");
  cmd->callback([args] {
    const std::vector<PressInfo>& catalogue = press_catalogue();
    std::vector<const PressInfo*> shown;
    for (const std::string& name : args->names) {  // every name checked before anything prints
      const auto it = std::find_if(catalogue.begin(), catalogue.end(), [&](const PressInfo& i) { return i.name == name; });
      if (it == catalogue.end()) fail("unknown press method '{}' (`deferkv presses` lists them)", name);
      shown.push_back(&*it);
    }
    if (args->all) {
      for (const PressInfo& info : catalogue) print_method(info);
    } else if (shown.empty()) {
      print_groups();
    } else {
      for (const PressInfo* info : shown) print_method(*info);
    }
  });
}

}  // namespace deferkv::cli
