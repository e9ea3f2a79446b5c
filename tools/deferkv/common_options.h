#pragma once
// Options shared by several subcommands (model path, threads, context, sampling),
// spelled as in llama.cpp's tools.
#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "deferkv/press.h"
#include "deferkv/sampler.h"

namespace deferkv {
class ThreadPool;
}

namespace deferkv::cli {

// The embedded default model, used when -m is not given: stories260K, a story writer.
std::string default_model_path();
// The embedded default of `deferkv eval`: the in-house retrieval model (models/README.md),
// on which the answers depend on the facts a KV press keeps.
std::string default_eval_model_path();

// -m/--model, defaulting to `default_path` (described in the help as `default_name`).
void add_model_option(CLI::App& cmd, std::string& path, const std::string& default_path = default_model_path(),
                      const std::string& default_name = "the embedded stories260K");
void add_threads_option(CLI::App& cmd, int& threads);
// --draft-model: what a press that drafts (speckv) continues the prompt with. The other
// things a press may need (lookahead weights, calibration profiles) are files named in
// its spec, so every command that takes --press reaches them.
void add_draft_model_option(CLI::App& cmd, std::string& path);
void add_sampling_options(CLI::App& cmd, SamplerParams& params);

std::shared_ptr<ThreadPool> make_thread_pool(int threads);
std::string read_text_file(const std::string& path);

// KV-cache compression: --press SPEC with --kv-budget N or --kv-ratio R.
struct PressOptions {
  std::string spec = "full";
  int64_t budget = 0;
  double ratio = -1;
};
void add_press_options(CLI::App& cmd, PressOptions& options);
// The press the options ask for (nullptr for "full").
std::unique_ptr<Press> make_press_from(const PressOptions& options);
// The budget as given (unset when neither flag is).
KvBudget budget_from(const PressOptions& options);

}  // namespace deferkv::cli
