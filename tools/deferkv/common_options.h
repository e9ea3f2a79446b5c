#pragma once
// Options shared by several subcommands (model path, threads, context, sampling),
// spelled as in llama.cpp's tools.
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "deferkv/press.h"
#include "deferkv/sampler.h"
#include "deferkv/session.h"

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

// llama.cpp spells some flags with one dash and several letters (-ctk), which CLI11 cannot
// declare: the command line with those rewritten to their long names (argv[0] kept).
std::vector<std::string> with_long_flag_names(int argc, char** argv);

// -ctk/--cache-type-k and -ctv/--cache-type-v (llama.cpp's flags): the KV cache's
// storage types, f16 by default; a name that is not a cache type is rejected when parsed.
struct CacheTypeOptions {
  std::string keys = "f16";
  std::string values = "f16";
  void apply(SessionOptions& options) const;
  std::string describe() const;  // "k f16, v f16"
};
void add_cache_type_options(CLI::App& cmd, CacheTypeOptions& options);
// `deferkv bench`: comma-separated lists, as llama-bench takes them; every (k, v) pair is
// measured.
struct CacheTypeLists {
  std::vector<std::string> keys = {"f16"};
  std::vector<std::string> values = {"f16"};
  std::vector<CacheTypeOptions> pairs() const;
};
void add_cache_type_options(CLI::App& cmd, CacheTypeLists& lists);

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
  static constexpr int64_t kNoBudget = -1;  // --kv-budget not given (0 is given, and refused)
  std::string spec = "full";
  int64_t budget = kNoBudget;
  double ratio = -1;
};
void add_press_options(CLI::App& cmd, PressOptions& options);
// The press the options ask for (nullptr for "full").
std::unique_ptr<Press> make_press_from(const PressOptions& options);
// The budget as given (unset when neither flag is).
KvBudget budget_from(const PressOptions& options);
// --question-agnostic: the press compresses the context before the question is read
// (deferkv::prefill_prompt); without it, context and question together.
void add_question_agnostic_option(CLI::App& cmd, bool& question_agnostic, const std::string& context_is);

// A warning on stderr when `budget` keeps the whole prompt (nothing will be evicted); `what`
// names the run ("snapkv@2000 at 1024 tokens: ") when there are several. True if it warned.
bool warn_if_budget_covers_prompt(const KvBudget& budget, int64_t prompt_tokens, const std::string& what = "");

}  // namespace deferkv::cli
