#pragma once
// The sweep's results gathered for the reports: score tables in the papers' layout
// (methods as rows, tasks or lengths as columns, Avg. last), the cost of each method,
// and the NIAH depth × length grid of each method.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "deferkv/eval_sweep.h"

namespace deferkv::eval {

// Means over a row's samples (KV after eviction: over those that evicted; peak: the max).
struct MethodCost {
  int64_t samples = 0;
  double prompt_tokens = 0;
  double prefill_seconds = 0;
  double decode_tokens_per_second = 0;
  double capture_seconds = 0;
  double eviction_seconds = 0;
  std::optional<double> kv_bytes_after_eviction;
  int64_t peak_kv_bytes = 0;
  int64_t peak_rss_bytes = 0;  // the max over the samples; 0: not recorded
  std::optional<int64_t> candidate_pool;  // a press's pool, entries per KV head (the max); unset: none
};

struct SummaryRow {
  std::string label, method, budget;
  std::vector<std::optional<double>> scores;  // one per column; unset: no samples yet
  std::vector<int64_t> counts;                // samples behind each column's score
  std::vector<int64_t> failed;                // failed rows (run_sweep) in each column
  std::string error;                          // the first failed row's error; "" when none failed
  std::optional<double> average;              // over the columns that have a score
  MethodCost cost;
};

struct SummaryTable {
  std::string title;  // "4096 tokens", "Average by length", "NIAH"
  std::optional<int64_t> length;  // the length the table is about, when it is about one
  std::vector<std::string> columns;
  std::vector<SummaryRow> rows;
};

// NIAH scores of one method: cells[depth][length], 0-100.
struct NiahGrid {
  std::string label;
  std::vector<int64_t> lengths;
  std::vector<double> depths;
  std::vector<std::vector<std::optional<double>>> cells;
  std::optional<double> average;
};

struct Summary {
  Benchmark benchmark = Benchmark::kRuler;
  // config.json's question_agnostic: the presses compressed the context before the question.
  bool question_agnostic = false;
  std::vector<SummaryTable> tables;
  std::vector<NiahGrid> grids;  // NIAH only
  int64_t failed = 0;           // the plan's failed rows
};

// From the folder's records (one per key), keeping those of the plan (its methods, matched
// by SweepMethod::identity, tasks, lengths and samples or depths). RULER: one table per length (task scores with RULER's rounding, their
// mean as Avg.) and, for two lengths or more, one of averages by length; NIAH: one table with the mean score per
// length and over all cells, and a grid per method; LongBench: one table, the datasets'
// scores (eval.py's rounding) and their unweighted mean as Avg.
// `failures`: failed rows (run_sweep's failures files); those whose key `records` holds
// were done since and do not count.
Summary summarize(const SweepPlan& plan, const std::vector<nlohmann::json>& records,
                  const std::vector<nlohmann::json>& failures = {});

}  // namespace deferkv::eval
