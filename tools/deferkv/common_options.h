#pragma once
// Options shared by several subcommands (model path, threads, context, sampling),
// spelled as in llama.cpp's tools.
#include <memory>
#include <string>
#include <vector>

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
void add_sampling_options(CLI::App& cmd, SamplerParams& params);

std::shared_ptr<ThreadPool> make_thread_pool(int threads);
std::string read_text_file(const std::string& path);

// A report's destination, the same in every command: --format names the format, -o/--output
// the file ("" for standard output). Folders of reports (eval) take -o as a folder instead.
struct ReportOutput {
  std::string format;
  std::string file;
};
// --format (one of `formats`, the first the default) and -o/--output FILE.
void add_report_output_options(CLI::App& cmd, ReportOutput& output, const std::vector<std::string>& formats);
// Checks --format against `formats` and refuses an -o that names a format ("-o json" as
// llama-bench spells it), saying to use --format.
void validate_report_output(const ReportOutput& output, const std::vector<std::string>& formats);
// Writes `text` to the file, or prints it.
void write_report(const ReportOutput& output, const std::string& text);

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
