#include "common_options.h"

#include <fstream>
#include <sstream>

#include "base/thread_pool.h"
#include "deferkv/error.h"

namespace deferkv::cli {

std::string default_model_path() { return DEFERKV_DEFAULT_MODEL; }

void add_model_option(CLI::App& cmd, std::string& path) {
  path = default_model_path();
  cmd.add_option("-m,--model", path, "GGUF model file (default: the embedded stories260K)");
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
