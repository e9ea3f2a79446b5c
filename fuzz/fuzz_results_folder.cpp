// A results folder's samples and failures files (eval's samples.jsonl and failures.jsonl:
// ours, but edited by hand, cut by a crash or copied between versions), read as
// `deferkv eval` reads them to resume a sweep, merge shards and write the reports. The first
// byte picks the benchmark of the plan (% 3: RULER, NIAH, LongBench) and whether the file
// is a samples or a failures file (/ 3 % 2); the rest is the file. Asserts: only
// deferkv::Error escapes the reader; a file it accepts summarises without any exception
// (the reader is the one check; nothing after it may find a field missing or of the wrong
// type), and every summary row has one score slot, one count and one failure count per
// column, with counts no larger than the file's records.
#include <cstdint>
#include <string>
#include <vector>

#include "deferkv/eval_sweep.h"
#include "eval/reports/summary.h"
#include "eval/sweep/sample_log.h"
#include "fuzz_support.h"

using namespace deferkv;

namespace {

eval::SweepPlan plan_for(uint8_t pick) {
  eval::SweepPlan plan;
  plan.methods = {{"full", std::nullopt, ""}, {"snapkv", KvBudget::per_head(64), "64"}};
  switch (pick % 3) {
    case 0:
      plan.benchmark = eval::Benchmark::kRuler;
      plan.tasks = {"niah_single_1", "qa_1"};
      plan.lengths = {4096, 8192};
      plan.samples = 4;
      break;
    case 1:
      plan.benchmark = eval::Benchmark::kNiah;
      plan.lengths = {1024, 4096};
      plan.depths = {0, 50, 100};
      break;
    default:
      plan.benchmark = eval::Benchmark::kLongBench;
      plan.tasks = {"qasper", "trec"};
      plan.samples = -1;
      break;
  }
  return plan;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const fuzz::ScratchDir scratch;
  if (size == 0) return 0;
  const eval::SweepPlan plan = plan_for(data[0]);
  const auto kind = (data[0] / 3) % 2 == 0 ? eval::RecordKind::kSample : eval::RecordKind::kFailure;
  const std::string path = scratch.write("samples.jsonl", fuzz::as_text(data + 1, size - 1));
  std::vector<nlohmann::json> records;
  if (!fuzz::accepts([&] { records = eval::SampleLog::read(path, kind); })) return 0;
  // Keys are what resuming and merging compare; they are read from the same fields.
  for (const nlohmann::json& r : records) eval::SampleLog::key_of(r);
  const std::vector<nlohmann::json> none;
  const eval::Summary summary = kind == eval::RecordKind::kSample ? eval::summarize(plan, records, none)
                                                                  : eval::summarize(plan, none, records);
  for (const eval::SummaryTable& table : summary.tables) {
    for (const eval::SummaryRow& row : table.rows) {
      fuzz::require(row.scores.size() == table.columns.size(), "a score slot per column");
      fuzz::require(row.counts.size() == table.columns.size() && row.failed.size() == table.columns.size(),
                    "a count and a failure count per column");
      for (int64_t n : row.counts) fuzz::require(n <= static_cast<int64_t>(records.size()), "counts within the records");
    }
  }
  fuzz::require(summary.failed <= static_cast<int64_t>(records.size()), "failed rows within the records");
  return 0;
}
