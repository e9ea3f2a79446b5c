#include "common_options.h"

#include <fstream>
#include <sstream>

#include "base/thread_pool.h"
#include "deferkv/error.h"

namespace deferkv::cli {

std::string default_model_path() { return DEFERKV_DEFAULT_MODEL; }
std::string default_eval_model_path() { return DEFERKV_DEFAULT_EVAL_MODEL; }

void add_model_option(CLI::App& cmd, std::string& path, const std::string& default_path,
                      const std::string& default_name) {
  path = default_path;
  cmd.add_option("-m,--model", path, "GGUF model file (default: " + default_name + ")");
}

void add_draft_model_option(CLI::App& cmd, std::string& path) {
  cmd.add_option("--draft-model", path, "GGUF draft model with the same tokenizer, for presses that draft (speckv)");
}

void add_threads_option(CLI::App& cmd, int& threads) {
  threads = ThreadPool::default_threads();
  cmd.add_option("-t,--threads", threads, "Threads (default: all cores)")->check(CLI::Range(1, 1024));
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

KvBudget budget_from(const PressOptions& options) {
  if (options.ratio >= 0) return KvBudget::ratio(options.ratio);
  if (options.budget != 0) return KvBudget::per_head(options.budget);
  return {};
}

std::unique_ptr<Press> make_press_from(const PressOptions& options) {
  if (options.spec == "full") {
    if (options.budget != 0 || options.ratio >= 0) fail("--kv-budget and --kv-ratio need a --press other than full");
    return nullptr;
  }
  return make_press(options.spec, budget_from(options));
}

}  // namespace deferkv::cli
