// `deferkv bench-press`: what compression costs and buys, measured in one run. For each
// prompt length, press and budget (--kv-budget 32,64,128: a row each): prefill time, the press's capture and eviction time (and
// their share of the full-cache prefill; eviction includes a lookahead's forward passes,
// also shown apart), decode speed once the eviction is done (the
// steps after it; DeferKV's first d steps run on the full cache), end-to-end latency
// relative to SnapKV at the same budget (the full cache's: to the first SnapKV row), KV bytes after eviction and at
// peak, and the process's peak resident memory over the run (its high-water mark reset before each run). A per-step
// press's cost while decoding (capture and eviction after the prefill) is also given per step and as a share of the
// decode step it is part of. Decode speed is also
// compared with full-cache decode at a short context (--short-context). Repetitions
// take the presses in turn (A B C, A B C, ...), so slow drifts of the machine hit all
// alike, and the median of each quantity is reported. With --decode-windows N, a second
// table gives each press's decode speed over consecutive windows of N steps, to show
// whether it stays flat over a long generation (Moment-KV) or falls as the cache grows.
#include <algorithm>
#include <chrono>
#include <optional>
#include <random>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "base/memory_stats.h"
#include "commands.h"
#include "common_options.h"
#include "deferkv/error.h"
#include "deferkv/session.h"
#include "eval_lists.h"

namespace deferkv::cli {
namespace {

struct PressBenchArgs {
  std::string model;
  std::vector<int64_t> prompt_sizes = {4096};
  std::vector<std::string> presses = {"full", "snapkv", "deferkv"};
  std::string budgets = "256";
  std::string ratios;  // --kv-ratio instead of --kv-budget when given
  int64_t n_gen = 32;
  int64_t short_context = 512;
  int repetitions = 2;
  int threads = 1;
  std::string draft_model;     // for speckv
  int64_t decode_window = 0;   // 0: no per-window table
  CacheTypeOptions cache_types;
};

// One run of a press: seconds, and decode speed over the steps after the eviction.
struct Measurement {
  double prefill = 0, capture = 0, eviction = 0, decode = 0;
  double lookahead = 0;  // the press's lookahead forward passes (part of eviction)
  double steady_decode_rate = 0;  // tokens/s over the decode steps after the eviction
  std::vector<double> window_rates;  // tokens/s over each --decode-windows window
  int64_t kv_bytes = 0, peak_bytes = 0;
  int64_t peak_rss = 0;  // the process's, model included
  // Capture and eviction in the decode steps (after the prefill's), per step, and their
  // share of the decode steps' time (which includes them).
  double step_press = 0, step_press_share = 0;
  double end_to_end() const { return prefill + decode + eviction; }
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// The median of every field over the repetitions.
Measurement median_of(const std::vector<Measurement>& runs) {
  auto field = [&](double Measurement::*f) {
    std::vector<double> v;
    for (const auto& r : runs) v.push_back(r.*f);
    return median(v);
  };
  Measurement m;
  m.prefill = field(&Measurement::prefill);
  m.capture = field(&Measurement::capture);
  m.eviction = field(&Measurement::eviction);
  m.lookahead = field(&Measurement::lookahead);
  m.decode = field(&Measurement::decode);
  m.step_press = field(&Measurement::step_press);
  m.step_press_share = field(&Measurement::step_press_share);
  m.steady_decode_rate = field(&Measurement::steady_decode_rate);
  for (size_t w = 0; w < runs.front().window_rates.size(); ++w) {
    std::vector<double> v;
    for (const auto& r : runs) v.push_back(r.window_rates[w]);
    m.window_rates.push_back(median(v));
  }
  m.kv_bytes = runs.back().kv_bytes;
  m.peak_bytes = runs.back().peak_bytes;
  std::vector<double> rss;
  for (const auto& r : runs) rss.push_back(static_cast<double>(r.peak_rss));
  m.peak_rss = static_cast<int64_t>(median(rss));
  return m;
}

// One row of the table: a press, and its budget ("full" has none).
struct Config {
  std::string press;
  std::optional<KvBudget> budget;
  std::string budget_label;  // "64", "r0.5"; "-" for full
};

// Every press with every budget, "full" once.
std::vector<Config> configs_of(const PressBenchArgs& args) {
  const auto budgets = parse_budgets(args.ratios.empty() ? args.budgets : "", args.ratios);
  std::vector<Config> configs;
  for (const std::string& press : args.presses) {
    if (press == "full") {
      configs.push_back({press, std::nullopt, "-"});
      continue;
    }
    for (const auto& [budget, label] : budgets) configs.push_back({press, budget, label});
  }
  return configs;
}

Measurement measure(const std::shared_ptr<const Model>& model, const std::shared_ptr<const Model>& draft,
                    const Config& config, int64_t prompt_tokens, const PressBenchArgs& args,
                    const std::shared_ptr<ThreadPool>& pool) {
  std::mt19937 rng(42);
  std::uniform_int_distribution<int32_t> pick(0, static_cast<int32_t>(model->config().n_vocab - 1));
  std::vector<int32_t> prompt(static_cast<size_t>(prompt_tokens)), gen(static_cast<size_t>(args.n_gen));
  for (auto& t : prompt) t = pick(rng);
  for (auto& t : gen) t = pick(rng);
  reset_peak_rss();
  const auto open_session = [&](int64_t after_prompt) {
    SessionOptions options;
    options.n_ctx = prompt_tokens + args.n_gen + 1 + after_prompt;
    args.cache_types.apply(options);
    auto s = std::make_unique<Session>(model, pool, options);
    if (draft) s->set_draft_model(draft);
    if (config.budget) s->set_press(make_press(config.press, *config.budget));
    return s;
  };
  std::unique_ptr<Session> opened = open_session(0);
  // The positions a press runs after the prompt (LookaheadKV's rows, KVzip's reconstruction).
  if (const int64_t after = opened->press_positions_after_prompt(prompt_tokens); after > 0) {
    opened = open_session(after);
  }
  Session& session = *opened;
  session.prefill(prompt);
  const SessionTimings after_prefill = session.timings();
  std::vector<double> step_seconds;
  for (int32_t token : gen) {
    const auto start = std::chrono::steady_clock::now();
    session.decode(token);
    step_seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  const SessionTimings& t = session.timings();
  Measurement m;
  // The press's hooks run outside prefill_seconds / decode_seconds; capture runs inside.
  m.prefill = t.prefill_seconds;
  m.capture = t.capture_seconds;
  m.eviction = t.eviction_seconds;
  m.lookahead = t.lookahead_seconds;
  m.decode = t.decode_seconds;
  const auto& eviction = session.last_eviction();
  // A per-step press (Moment-KV, TOVA) evicts up to the last step: its speed is that of
  // every step, evictions included.
  size_t first_steady = eviction ? static_cast<size_t>(eviction->decode_step) : 0;
  if (first_steady >= step_seconds.size()) first_steady = 0;
  double steady = 0;
  for (size_t s = first_steady; s < step_seconds.size(); ++s) steady += step_seconds[s];
  m.steady_decode_rate = static_cast<double>(step_seconds.size() - first_steady) / steady;
  for (size_t begin = 0; args.decode_window > 0 && begin < step_seconds.size();
       begin += static_cast<size_t>(args.decode_window)) {
    const size_t end = std::min(step_seconds.size(), begin + static_cast<size_t>(args.decode_window));
    double seconds = 0;
    for (size_t s = begin; s < end; ++s) seconds += step_seconds[s];
    m.window_rates.push_back(static_cast<double>(end - begin) / seconds);
  }
  const KvStats kv = session.kv_stats();
  m.kv_bytes = eviction ? eviction->bytes : kv.bytes;
  m.peak_bytes = kv.peak_bytes;
  m.peak_rss = peak_rss_bytes();
  double decoding = 0;
  for (double s : step_seconds) decoding += s;
  const double step_press =
      t.capture_seconds - after_prefill.capture_seconds + t.eviction_seconds - after_prefill.eviction_seconds;
  m.step_press = step_seconds.empty() ? 0 : step_press / static_cast<double>(step_seconds.size());
  m.step_press_share = decoding > 0 ? step_press / decoding : 0;
  return m;
}

// Decode tok/s per window of steps, one row per press, and the last window over the first.
void print_decode_windows(int64_t prompt, const std::vector<std::pair<std::string, Measurement>>& rows,
                          int64_t window) {
  const size_t n_windows = rows.front().second.window_rates.size();
  fmt::print("\ndecode tok/s per window of {} steps after a {}-token prompt\n\n| press |", window, prompt);
  for (size_t w = 0; w < n_windows; ++w) fmt::print(" {}-{} |", w * window + 1, (w + 1) * window);
  fmt::print(" last / first |\n| --- |");
  for (size_t w = 0; w <= n_windows; ++w) fmt::print(" ---: |");
  fmt::print("\n");
  for (const auto& [press, m] : rows) {
    fmt::print("| {} |", press);
    for (double rate : m.window_rates) fmt::print(" {:.1f} |", rate);
    fmt::print(" {:.3f} |\n", m.window_rates.back() / m.window_rates.front());
  }
  fmt::print("\n");
}

void run_press_bench(const PressBenchArgs& args) {
  if (args.repetitions < 1) fail("-r must be at least 1");
  if (args.decode_window < 0) fail("--decode-windows must be positive");
  auto model = Model::load(args.model);
  const std::shared_ptr<const Model> draft = args.draft_model.empty() ? nullptr : Model::load(args.draft_model);
  auto pool = make_thread_pool(args.threads);
  std::vector<Measurement> short_runs;
  const std::vector<Config> configs = configs_of(args);
  const Config full_cache{"full", std::nullopt, "-"};
  for (int rep = 0; rep < args.repetitions; ++rep) {
    short_runs.push_back(measure(model, nullptr, full_cache, args.short_context, args, pool));
  }
  const double short_decode = median_of(short_runs).steady_decode_rate;
  std::vector<std::string> budget_texts;
  for (const auto& [budget, label] : parse_budgets(args.ratios.empty() ? args.budgets : "", args.ratios)) {
    budget_texts.push_back(budget.describe());
  }
  fmt::print("model {}, {} threads, KV cache {}, budget {}, {} decode tokens, medians of {} repetitions\n\n", args.model,
             args.threads, args.cache_types.describe(), fmt::join(budget_texts, "; "), args.n_gen, args.repetitions);
  fmt::print("| prompt | press | budget | prefill s | capture ms | eviction ms | of which lookahead ms | "
             "(capture+eviction) / full prefill | "
             "decode tok/s after eviction | vs full@{} | end-to-end s | vs snapkv | KV MiB after | KV MiB peak | "
             "RSS MiB peak | decode capture+eviction ms/step | of a decode step |\n",
             args.short_context);
  fmt::print("| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | "
             "---: | ---: |\n");
  for (int64_t n : args.prompt_sizes) {
    std::vector<std::vector<Measurement>> runs(configs.size());
    for (int rep = 0; rep < args.repetitions; ++rep) {
      for (size_t c = 0; c < configs.size(); ++c) runs[c].push_back(measure(model, draft, configs[c], n, args, pool));
    }
    std::vector<std::pair<std::string, Measurement>> rows;  // "press" or "press@budget" for the window table
    for (size_t c = 0; c < configs.size(); ++c) {
      const bool one_budget = configs.size() == args.presses.size() || !configs[c].budget;
      rows.emplace_back(one_budget ? configs[c].press : configs[c].press + "@" + configs[c].budget_label,
                        median_of(runs[c]));
    }
    const Measurement* full = nullptr;
    for (size_t c = 0; c < configs.size(); ++c) {
      if (configs[c].press == "full") full = &rows[c].second;
    }
    for (size_t c = 0; c < configs.size(); ++c) {
      const Measurement& m = rows[c].second;
      // The end-to-end reference: the first SnapKV press at the same budget.
      const Measurement* snap = nullptr;
      for (size_t o = 0; o < configs.size() && snap == nullptr; ++o) {
        const bool same_budget = !configs[c].budget || configs[o].budget_label == configs[c].budget_label;
        if (configs[o].press.rfind("snapkv", 0) == 0 && same_budget) snap = &rows[o].second;
      }
      const double decode_rate = m.steady_decode_rate;
      fmt::print("| {} | {} | {} | {:.3f} | {:.1f} | {:.1f} | {:.1f} | {} | {:.1f} | {:.3f} | {:.3f} | {} | {:.2f} | {:.2f} | "
                 "{:.1f} | {:.3f} | {:.2f}% |\n",
                 n, configs[c].press, configs[c].budget_label, m.prefill, m.capture * 1e3, m.eviction * 1e3,
                 m.lookahead * 1e3,
                 full != nullptr ? fmt::format("{:.2f}%", 100.0 * (m.capture + m.eviction) / full->prefill) : "-",
                 decode_rate, decode_rate / short_decode, m.end_to_end(),
                 snap != nullptr ? fmt::format("{:.3f}", m.end_to_end() / snap->end_to_end()) : "-",
                 m.kv_bytes / 1048576.0, m.peak_bytes / 1048576.0, m.peak_rss / 1048576.0, m.step_press * 1e3,
                 100.0 * m.step_press_share);
    }
    if (args.decode_window > 0) print_decode_windows(n, rows, args.decode_window);
  }
  fmt::print("\nfull-cache decode at context {}: {:.1f} tok/s\n", args.short_context, short_decode);
}

}  // namespace

void add_press_bench_command(CLI::App& app) {
  auto args = std::make_shared<PressBenchArgs>();
  CLI::App* cmd = app.add_subcommand("bench-press", "Measure the cost and the decode speed-up of KV compression");
  add_model_option(*cmd, args->model);
  cmd->add_option("-p,--n-prompt", args->prompt_sizes, "Prompt lengths")->delimiter(',')->capture_default_str();
  cmd->add_option("--press", args->presses, "Presses to compare (full = no compression)")
      ->delimiter(';')->capture_default_str();
  auto* budget = cmd->add_option("--kv-budget", args->budgets,
                                 "Prompt KV entries kept per KV head per layer; several, comma-separated, give a row each "
                                 "(32,64,128)")
                     ->capture_default_str();
  auto* ratio = cmd->add_option("--kv-ratio", args->ratios,
                                "Or the shares of the prompt evicted (kvpress's ratio), comma-separated (0.5,0.75)");
  budget->excludes(ratio);
  cmd->add_option("-n,--n-gen", args->n_gen, "Decode steps after the prompt")->capture_default_str();
  cmd->add_option("--short-context", args->short_context, "Context of the full-cache decode baseline")
      ->capture_default_str();
  cmd->add_option("-r,--repetitions", args->repetitions, "Repetitions (medians are reported)")->capture_default_str();
  add_draft_model_option(*cmd, args->draft_model);
  cmd->add_option("--decode-windows", args->decode_window,
                  "Also report decode tok/s over consecutive windows of this many steps");
  add_threads_option(*cmd, args->threads);
  add_cache_type_options(*cmd, args->cache_types);
  cmd->callback([args] { run_press_bench(*args); });
}

}  // namespace deferkv::cli
