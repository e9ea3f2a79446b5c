#include "common_options.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "base/thread_pool.h"
#include "deferkv/embedding.h"
#include "deferkv/error.h"
#include "kv/kv_cache_type.h"

namespace deferkv::cli {

std::string default_model_path() { return embedded_model_path(); }
std::string default_eval_model_path() { return embedded_eval_model_path(); }

void add_model_option(CLI::App& cmd, std::string& path, const std::string& default_path,
                      const std::string& default_name) {
  path = default_path;
  cmd.add_option("-m,--model", path, "GGUF model file (default: " + default_name + ")");
}

void add_report_output_options(CLI::App& cmd, ReportOutput& output, const std::vector<std::string>& formats) {
  output.format = formats.front();
  cmd.add_option("--format", output.format, fmt::format("Output format: {}", fmt::join(formats, ", ")))
      ->capture_default_str();
  cmd.add_option("-o,--output", output.file, "Write the report to this file (default: standard output)");
}

void validate_report_output(const ReportOutput& output, const std::vector<std::string>& formats) {
  if (std::find(formats.begin(), formats.end(), output.format) == formats.end()) {
    fail("--format must be one of {}, got '{}'", fmt::join(formats, ", "), output.format);
  }
  if (std::find(formats.begin(), formats.end(), output.file) != formats.end()) {
    fail("-o names the output file; for the {} format give --format {}", output.file, output.file);
  }
}

void write_report(const ReportOutput& output, const std::string& text) {
  if (output.file.empty()) {
    fmt::print("{}", text);
    return;
  }
  std::ofstream out(output.file, std::ios::binary);
  if (!(out << text)) fail("cannot write '{}'", output.file);
}

void add_draft_model_option(CLI::App& cmd, std::string& path) {
  cmd.add_option("--draft-model", path, "GGUF draft model with the same tokenizer, for presses that draft (speckv)");
}

void add_threads_option(CLI::App& cmd, int& threads) {
  threads = ThreadPool::default_threads();
  cmd.add_option("-t,--threads", threads, "Threads (default: the cores this process may use: its affinity mask and cgroup quota)")->check(CLI::Range(1, 1024));
}

void add_sampling_options(CLI::App& cmd, SamplerParams& p) {
  cmd.add_option("--temp", p.temperature, "Temperature; 0 = greedy")->capture_default_str();
  cmd.add_option("--top-k", p.top_k, "Top-k sampling; 0 = off")->capture_default_str();
  cmd.add_option("--top-p", p.top_p, "Top-p (nucleus) sampling; 1 = off")->capture_default_str();
  cmd.add_option("--min-p", p.min_p, "Min-p sampling; 0 = off")->capture_default_str();
  cmd.add_option("--repeat-penalty", p.repeat_penalty, "Repetition penalty; 1 = off")
      ->capture_default_str();
  cmd.add_option("--repeat-last-n", p.repeat_last_n, "Tokens the penalty looks back over")
      ->capture_default_str();
  cmd.add_option("-s,--seed", p.seed, "Random seed (default: random)");
}

namespace {

constexpr const char* kCacheTypeK = "--cache-type-k";
constexpr const char* kCacheTypeV = "--cache-type-v";
// llama.cpp's one-dash spellings and the long flags they stand for.
constexpr std::pair<const char*, const char*> kOneDashFlags[] = {{"-ctk", kCacheTypeK}, {"-ctv", kCacheTypeV}};

// The flags of both sides, declared once; `Target` is a name or a list of names.
template <typename Target>
void add_cache_type_flags(CLI::App& cmd, Target& keys, Target& values, const std::string& list_note) {
  const auto valid = [](const std::string& name) {
    try {
      kv_cache_type_from_name(name);
      return std::string();
    } catch (const Error& e) {
      return std::string(e.what());
    }
  };
  const std::string types = " (" + kv_cache_type_names() + "; default f16)" + list_note;
  auto* k = cmd.add_option(kCacheTypeK, keys, "KV cache storage type of keys, also -ctk" + types)->check(valid);
  auto* v = cmd.add_option(kCacheTypeV, values, "KV cache storage type of values, also -ctv" + types)->check(valid);
  if constexpr (!std::is_same_v<Target, std::string>) {
    k->delimiter(',');
    v->delimiter(',');
  }
}

}  // namespace

std::vector<std::string> with_long_flag_names(int argc, char** argv) {
  std::vector<std::string> args(argv, argv + argc);
  for (size_t i = 1; i < args.size(); ++i) {
    for (const auto& [one_dash, long_name] : kOneDashFlags) {
      if (args[i] == one_dash) args[i] = long_name;
    }
  }
  return args;
}

void CacheTypeOptions::apply(SessionOptions& options) const {
  options.cache_type_k = keys;
  options.cache_type_v = values;
}

std::string CacheTypeOptions::describe() const { return "k " + keys + ", v " + values; }

void add_cache_type_options(CLI::App& cmd, CacheTypeOptions& options) {
  add_cache_type_flags(cmd, options.keys, options.values, "");
}

std::vector<CacheTypeOptions> CacheTypeLists::pairs() const {
  std::vector<CacheTypeOptions> out;
  for (const std::string& k : keys) {
    for (const std::string& v : values) out.push_back({k, v});
  }
  return out;
}

void add_cache_type_options(CLI::App& cmd, CacheTypeLists& lists) {
  add_cache_type_flags(cmd, lists.keys, lists.values, "; comma-separated lists, every pair measured");
}

std::shared_ptr<ThreadPool> make_thread_pool(int threads) {
  return std::make_shared<ThreadPool>(threads);
}

std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot read '{}'", path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace deferkv::cli

namespace deferkv::cli {

void add_press_options(CLI::App& cmd, PressOptions& options) {
  cmd.add_option("--press", options.spec,
                 "KV-cache compression, e.g. snapkv or deferkv:d=1,eta=0.7,base=adakv (see `deferkv presses`)")
      ->capture_default_str();
  auto* budget = cmd.add_option("--kv-budget", options.budget,
                                "Prompt KV entries kept per KV head per layer (B_total = budget x layers)");
  auto* ratio = cmd.add_option("--kv-ratio", options.ratio,
                               "Fraction of the prompt's KV entries to evict (kvpress's compression ratio)");
  budget->excludes(ratio);
}

void add_question_agnostic_option(CLI::App& cmd, bool& question_agnostic, const std::string& context_is) {
  cmd.add_flag("--question-agnostic", question_agnostic,
               "Compress the context before the question is read, then read the question and decode on the "
               "compressed cache (kvpress's default; " + context_is + "); default: question-aware, the press "
               "compresses context and question together (docs/compression.md)");
}

KvBudget budget_from(const PressOptions& options) {
  if (options.ratio >= 0) return KvBudget::ratio(options.ratio);
  if (options.budget != PressOptions::kNoBudget) return KvBudget::per_head(options.budget);
  return {};
}

bool warn_if_budget_covers_prompt(const KvBudget& budget, int64_t prompt_tokens, const std::string& what) {
  const std::string warning = budget_covers_prompt_warning(budget, prompt_tokens);
  if (warning.empty()) return false;
  fmt::print(stderr, "warning: {}{}\n", what, warning);
  return true;
}

std::unique_ptr<Press> make_press_from(const PressOptions& options) {
  if (options.spec == "full") {
    if (options.budget != PressOptions::kNoBudget || options.ratio >= 0) fail("--kv-budget and --kv-ratio need a --press other than full");
    return nullptr;
  }
  return make_press(options.spec, budget_from(options));
}

}  // namespace deferkv::cli
