#include "eval/reports/summary.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include <fmt/format.h>

#include "deferkv/eval_metrics.h"
#include "eval/sweep/sample_log.h"

namespace deferkv::eval {
namespace {

// A row's samples, by column, and what they cost; its failed rows by column.
struct Tally {
  std::map<std::string, std::vector<double>> scores;
  std::vector<const nlohmann::json*> samples;
  std::map<std::string, int64_t> failed;
  std::string error;  // the first failed row's
};

void add_failures(Tally& t, const std::string& column, int64_t n, const std::string& error) {
  t.failed[column] += n;
  if (t.error.empty()) t.error = error;
}

MethodCost cost_of(const std::vector<const nlohmann::json*>& samples) {
  MethodCost c;
  c.samples = static_cast<int64_t>(samples.size());
  if (samples.empty()) return c;
  double after = 0;
  int64_t evicted = 0;
  for (const nlohmann::json* s : samples) {
    c.prompt_tokens += (*s)["prompt_tokens"].get<double>();
    c.prefill_seconds += (*s)["prefill_seconds"].get<double>();
    c.decode_tokens_per_second += (*s)["decode_tokens_per_second"].get<double>();
    c.capture_seconds += (*s)["capture_seconds"].get<double>();
    c.eviction_seconds += (*s)["eviction_seconds"].get<double>();
    if (!(*s)["kv_bytes_after_eviction"].is_null()) {
      after += (*s)["kv_bytes_after_eviction"].get<double>();
      ++evicted;
    }
    c.peak_kv_bytes = std::max(c.peak_kv_bytes, (*s)["peak_kv_bytes"].get<int64_t>());
    c.peak_rss_bytes = std::max(c.peak_rss_bytes, s->value("peak_rss_bytes", int64_t{0}));  // older records lack it
    if (s->contains("candidate_pool")) {
      c.candidate_pool = std::max(c.candidate_pool.value_or(0), (*s)["candidate_pool"].get<int64_t>());
    }
  }
  const auto n = static_cast<double>(samples.size());
  c.prompt_tokens /= n;
  c.prefill_seconds /= n;
  c.decode_tokens_per_second /= n;
  c.capture_seconds /= n;
  c.eviction_seconds /= n;
  if (evicted > 0) c.kv_bytes_after_eviction = after / static_cast<double>(evicted);
  return c;
}

SummaryRow row_of(const SweepMethod& m, const std::vector<std::string>& columns, const Tally& tally,
                  double (*column_score)(const std::vector<double>&)) {
  SummaryRow row{m.label(), m.press, m.budget_label, {}, {}, {}, tally.error, std::nullopt, cost_of(tally.samples)};
  std::vector<double> present;
  for (const std::string& column : columns) {
    const auto failed = tally.failed.find(column);
    row.failed.push_back(failed == tally.failed.end() ? 0 : failed->second);
    const auto it = tally.scores.find(column);
    if (it == tally.scores.end()) {
      row.scores.emplace_back();
      row.counts.push_back(0);
      continue;
    }
    row.counts.push_back(static_cast<int64_t>(it->second.size()));
    row.scores.push_back(column_score(it->second));
    present.push_back(*row.scores.back());
  }
  if (!present.empty()) row.average = benchmark_average(present);
  return row;
}

double ruler_column(const std::vector<double>& samples) { return ruler_task_score(samples); }

double mean_2dp(const std::vector<double>& values) {
  double sum = 0;
  for (double v : values) sum += v;
  return python_round(sum / static_cast<double>(values.size()), 2);
}

bool wanted_ruler(const SweepPlan& plan, const nlohmann::json& r) {
  const std::string task = r["task"].get<std::string>();
  const int64_t length = r["length"].get<int64_t>();
  return std::find(plan.tasks.begin(), plan.tasks.end(), task) != plan.tasks.end() &&
         std::find(plan.lengths.begin(), plan.lengths.end(), length) != plan.lengths.end() &&
         r["index"].get<int64_t>() < plan.samples;
}

Summary summarize_ruler(const SweepPlan& plan, const std::vector<nlohmann::json>& records,
                        const std::vector<const nlohmann::json*>& failures) {
  // (label, length) → tally by task; label → per-length averages come from those.
  std::map<std::pair<std::string, int64_t>, Tally> tallies;
  for (const nlohmann::json& r : records) {
    if (!r.contains("task") || !wanted_ruler(plan, r)) continue;
    Tally& t = tallies[{r["method_params"].get<std::string>(), r["length"].get<int64_t>()}];
    t.scores[r["task"].get<std::string>()].push_back(r["score"].get<double>());
    t.samples.push_back(&r);
  }
  Summary summary;
  summary.benchmark = Benchmark::kRuler;
  for (const nlohmann::json* f : failures) {
    if (!f->contains("task") || !wanted_ruler(plan, *f)) continue;
    Tally& t = tallies[{(*f)["method_params"].get<std::string>(), (*f)["length"].get<int64_t>()}];
    add_failures(t, (*f)["task"].get<std::string>(), 1, (*f)["error"].get<std::string>());
    ++summary.failed;
  }
  std::vector<std::string> length_columns;
  std::map<std::string, Tally> by_length;  // label → the Avg. of each length
  for (int64_t length : plan.lengths) {
    SummaryTable table{fmt::format("{} tokens", length), length, plan.tasks, {}};
    for (const SweepMethod& m : plan.methods) {
      const Tally& t = tallies[{m.identity(), length}];
      table.rows.push_back(row_of(m, plan.tasks, t, ruler_column));
      Tally& overall = by_length[m.label()];
      if (table.rows.back().average) overall.scores[std::to_string(length)].push_back(*table.rows.back().average);
      overall.samples.insert(overall.samples.end(), t.samples.begin(), t.samples.end());
      for (const auto& [task, n] : t.failed) add_failures(overall, std::to_string(length), n, t.error);
    }
    summary.tables.push_back(std::move(table));
    length_columns.push_back(std::to_string(length));
  }
  if (plan.lengths.size() < 2) return summary;  // it would repeat the one length's table
  SummaryTable overall{"Average by length", std::nullopt, length_columns, {}};
  for (const SweepMethod& m : plan.methods) overall.rows.push_back(row_of(m, length_columns, by_length[m.label()], mean_2dp));
  summary.tables.push_back(std::move(overall));
  return summary;
}

bool wanted_niah(const SweepPlan& plan, const nlohmann::json& r) {
  if (r.contains("task") || r.contains("dataset")) return false;
  const int64_t length = r["length"].get<int64_t>();
  const double depth = r["depth"].get<double>();
  return std::find(plan.lengths.begin(), plan.lengths.end(), length) != plan.lengths.end() &&
         std::find(plan.depths.begin(), plan.depths.end(), depth) != plan.depths.end();
}

Summary summarize_niah(const SweepPlan& plan, const std::vector<nlohmann::json>& records,
                       const std::vector<const nlohmann::json*>& failures) {
  std::map<std::tuple<std::string, int64_t, double>, double> cells;
  std::map<std::string, Tally> tallies;
  for (const nlohmann::json& r : records) {
    if (!wanted_niah(plan, r)) continue;
    const int64_t length = r["length"].get<int64_t>();
    const double depth = r["depth"].get<double>();
    const std::string method = r["method_params"].get<std::string>();
    const double score = niah_percent(r["score"].get<double>());
    cells[{method, length, depth}] = score;
    tallies[method].scores[std::to_string(length)].push_back(score);
    tallies[method].samples.push_back(&r);
  }
  Summary summary;
  summary.benchmark = Benchmark::kNiah;
  for (const nlohmann::json* f : failures) {
    if (!wanted_niah(plan, *f)) continue;
    add_failures(tallies[(*f)["method_params"].get<std::string>()], std::to_string((*f)["length"].get<int64_t>()), 1,
                 (*f)["error"].get<std::string>());
    ++summary.failed;
  }
  SummaryTable table{"Needle-in-a-Haystack (ROUGE-1 F x 100, mean over depths)", std::nullopt, {}, {}};
  for (int64_t length : plan.lengths) table.columns.push_back(std::to_string(length));
  for (const SweepMethod& m : plan.methods) {
    SummaryRow row = row_of(m, table.columns, tallies[m.identity()], mean_2dp);
    NiahGrid grid{m.label(), plan.lengths, plan.depths, {}, std::nullopt};
    std::vector<double> all;
    for (double depth : plan.depths) {
      grid.cells.emplace_back();
      for (int64_t length : plan.lengths) {
        const auto it = cells.find({m.identity(), length, depth});
        grid.cells.back().push_back(it == cells.end() ? std::nullopt : std::optional<double>(it->second));
        if (it != cells.end()) all.push_back(it->second);
      }
    }
    // The mean over all cells (not over the length means, which may hold different counts).
    if (!all.empty()) row.average = grid.average = mean_2dp(all);
    table.rows.push_back(std::move(row));
    summary.grids.push_back(std::move(grid));
  }
  summary.tables.push_back(std::move(table));
  return summary;
}

double longbench_column(const std::vector<double>& samples) { return longbench_dataset_score(samples); }

// The papers' LongBench table: one row per method and budget, the datasets across.
bool wanted_longbench(const SweepPlan& plan, const nlohmann::json& r) {
  if (!r.contains("dataset")) return false;
  const std::string dataset = r["dataset"].get<std::string>();
  return std::find(plan.tasks.begin(), plan.tasks.end(), dataset) != plan.tasks.end() &&
         (plan.samples < 0 || r["index"].get<int64_t>() < plan.samples);
}

Summary summarize_longbench(const SweepPlan& plan, const std::vector<nlohmann::json>& records,
                            const std::vector<const nlohmann::json*>& failures) {
  std::map<std::string, Tally> tallies;
  for (const nlohmann::json& r : records) {
    if (!wanted_longbench(plan, r)) continue;
    const std::string dataset = r["dataset"].get<std::string>();
    Tally& t = tallies[r["method_params"].get<std::string>()];
    t.scores[dataset].push_back(r["score"].get<double>());
    t.samples.push_back(&r);
  }
  Summary summary;
  summary.benchmark = Benchmark::kLongBench;
  for (const nlohmann::json* f : failures) {
    if (!wanted_longbench(plan, *f)) continue;
    add_failures(tallies[(*f)["method_params"].get<std::string>()], (*f)["dataset"].get<std::string>(), 1,
                 (*f)["error"].get<std::string>());
    ++summary.failed;
  }
  SummaryTable table{"LongBench", std::nullopt, plan.tasks, {}};
  for (const SweepMethod& m : plan.methods) table.rows.push_back(row_of(m, plan.tasks, tallies[m.identity()], longbench_column));
  summary.tables.push_back(std::move(table));
  return summary;
}

}  // namespace

Summary summarize(const SweepPlan& plan, const std::vector<nlohmann::json>& records,
                  const std::vector<nlohmann::json>& failures) {
  // A row of the plan's methods failed and not done since, its last failure only (a rerun
  // retries it).
  std::set<std::string> done, methods;
  for (const nlohmann::json& r : records) done.insert(SampleLog::key_of(r));
  for (const SweepMethod& m : plan.methods) methods.insert(m.identity());
  std::map<std::string, const nlohmann::json*> failed;
  for (const nlohmann::json& f : failures) {
    const std::string key = SampleLog::key_of(f);
    if (!done.contains(key) && methods.contains(f["method_params"].get<std::string>())) failed[key] = &f;
  }
  std::vector<const nlohmann::json*> open;
  for (const auto& [key, f] : failed) open.push_back(f);
  switch (plan.benchmark) {
    case Benchmark::kNiah: return summarize_niah(plan, records, open);
    case Benchmark::kLongBench: return summarize_longbench(plan, records, open);
    case Benchmark::kRuler: break;
  }
  return summarize_ruler(plan, records, open);
}

}  // namespace deferkv::eval
