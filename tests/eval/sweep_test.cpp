// The sweep without a model: an executor that answers from the references (or not at
// all) shows the samples scored with the official metrics, the log resumed, the results
// folder tied to its configuration and the reports in the papers' layout.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "deferkv/error.h"
#include "deferkv/eval_longbench.h"
#include "deferkv/eval_sweep.h"
#include "eval/eval_test_util.h"
#include "support/read_file.h"
#include "eval/plots/niah_heatmap.h"
#include "eval/sweep/sample_log.h"
#include "tensor/gguf_test_util.h"

namespace deferkv::eval {
namespace {

using nlohmann::ordered_json;

const TaskGenerator& llama_generator() {
  static TaskGenerator generator(test::llama_spm(), TaskOptions{});
  return generator;
}

std::string read(const std::string& path) { return testing::read_file(path); }

size_t lines_of(const std::string& path) { return eval_test::count_of(read(path), "\n"); }

SweepPlan ruler_plan() {
  SweepPlan plan;
  plan.benchmark = Benchmark::kRuler;
  plan.tasks = {"niah_single_1", "fwe"};
  plan.lengths = {1024};
  plan.samples = 2;
  plan.methods = {{"full", std::nullopt, ""}, {"snapkv", KvBudget::per_head(64), "64"}};
  return plan;
}

// full answers every reference; snapkv answers the first one only.
SampleRun answer(const SweepMethod& m, const TaskSample& s) {
  SampleRun run;
  if (m.press == "full") {
    for (const std::string& r : s.references) run.prediction += r + ", ";
  } else {
    run.prediction = s.references[0];
  }
  run.prefill_seconds = 0.5;
  run.decode_seconds = 0.25;
  run.decode_tokens = 10;
  run.peak_kv_bytes = m.budget ? 1000 : 2000;
  if (m.budget) run.kv_bytes_after_eviction = 400;
  return run;
}

TEST(Sweep, ScoresEverySampleAndResumesWhereItStopped) {
  gguf_test::TempDir dir;
  const SweepPlan plan = ruler_plan();
  int calls = 0;
  const SampleExecutor counted = [&](const SweepMethod& m, const TaskSample& s) {
    ++calls;
    return answer(m, s);
  };
  const std::string log = dir.file("samples.jsonl");
  EXPECT_EQ(run_sweep(plan, llama_generator(), counted, dir.path().string(), nullptr), 8);
  EXPECT_EQ(calls, 8);
  ASSERT_EQ(lines_of(log), 8u);
  // A rerun finds everything done.
  EXPECT_EQ(run_sweep(plan, llama_generator(), counted, dir.path().string(), nullptr), 0);
  EXPECT_EQ(calls, 8);
  // Drop the last two samples, the second one cut mid-line as by a crash: only they run again.
  const std::string text = read(log);
  size_t cut = text.size() - 1;
  for (int i = 0; i < 2; ++i) cut = text.rfind('\n', cut - 1);
  std::ofstream(log, std::ios::binary | std::ios::trunc) << text.substr(0, cut + 1) << R"({"label":"snap)";
  EXPECT_EQ(run_sweep(plan, llama_generator(), counted, dir.path().string(), nullptr), 2);
  EXPECT_EQ(calls, 10);
  const std::vector<nlohmann::json> records = SampleLog::read(log);
  ASSERT_EQ(records.size(), 8u);
  std::set<std::string> keys;
  for (const auto& r : records) keys.insert(SampleLog::key_of(r));
  EXPECT_EQ(keys.size(), 8u);
  // The record: the fields `deferkv score` reads, the score, the cost.
  const nlohmann::json& first = records[0];
  EXPECT_EQ(first["label"], "full");
  EXPECT_EQ(first["task"], "niah_single_1");
  EXPECT_EQ(first["score"], 1.0);
  EXPECT_EQ(first["decode_tokens_per_second"], 40.0);
  EXPECT_TRUE(first["kv_bytes_after_eviction"].is_null());
  EXPECT_EQ(records[1]["label"], "snapkv@64");
  EXPECT_EQ(records[1]["kv_bytes_after_eviction"], 400);
}

TEST(Sweep, ReportsPutMethodsInRowsAndTasksInColumns) {
  gguf_test::TempDir dir;
  const SweepPlan plan = ruler_plan();
  const ordered_json config = {{"benchmark", "ruler"}, {"seed", 42}};
  const std::string out = prepare_results_dir(dir.path().string(), "ruler-test", config);
  run_sweep(plan, llama_generator(), answer, out, nullptr);
  write_reports(plan, out, {{"git_commit", "abc"}});
  // fwe has three answers: snapkv's first-only answer scores 1/3 on it; Avg. is Python's round(66.665, 2).
  const std::string md = read(out + "/summary.md");
  EXPECT_NE(md.find("| method | niah_single_1 | fwe | Avg. |\n| --- | ---: | ---: | ---: |\n"
                    "| full | 100.00 | 100.00 | 100.00 |\n| snapkv@64 | 100.00 | 33.33 | 66.66 |\n"),
            std::string::npos) << md;
  EXPECT_NE(md.find("| snapkv@64 | 4 |"), std::string::npos);
  // results.csv: tidy, one line per method, task and length, the budget as a number.
  const std::string csv = read(out + "/results.csv");
  EXPECT_EQ(csv.substr(0, csv.find('\n')),
            "label,method,kv_budget,kv_ratio,task,length,score,samples,prompt_tokens,prefill_seconds,"
            "decode_tokens_per_second,capture_seconds,eviction_seconds,kv_bytes_after_eviction,peak_kv_bytes");
  EXPECT_NE(csv.find("\nsnapkv@64,snapkv,64,,fwe,1024,33.33,2,"), std::string::npos) << csv;
  EXPECT_NE(csv.find("\nfull,full,,,niah_single_1,1024,100.00,2,"), std::string::npos) << csv;
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 5);  // the header + 2 methods x 2 tasks
  const auto summary = nlohmann::json::parse(read(out + "/summary.json"));
  EXPECT_EQ(summary["config"]["seed"], 42);
  EXPECT_EQ(summary["run"]["git_commit"], "abc");
  const auto& row = summary["tables"][0]["rows"][1];
  EXPECT_EQ(row["scores"]["fwe"], 33.33);
  EXPECT_EQ(row["cost"]["peak_kv_bytes"], 1000);
  EXPECT_EQ(row["cost"]["kv_bytes_after_eviction"], 400.0);
  EXPECT_EQ(row["kv_budget"], 64);
  EXPECT_TRUE(row["kv_ratio"].is_null());
  // One length: no "Average by length" table repeating it.
  EXPECT_EQ(summary["tables"].size(), 1u);
}

TEST(Sweep, ResultsFolderIsNamedFromTheConfigAndNeverTakenOver) {
  gguf_test::TempDir dir;
  const ordered_json a = {{"seed", 1}}, b = {{"seed", 2}};
  const std::string da = prepare_results_dir(dir.path().string(), "ruler-m", a);
  EXPECT_EQ(prepare_results_dir(dir.path().string(), "ruler-m", a), da);  // the same config resumes
  const std::string db = prepare_results_dir(dir.path().string(), "ruler-m", b);
  EXPECT_NE(db, da);
  EXPECT_EQ(std::filesystem::path(da).filename().string().rfind("ruler-m-", 0), 0u);
  std::ofstream(da + "/config.json", std::ios::trunc) << "{\"seed\": 3}\n";
  EXPECT_THROW(prepare_results_dir(dir.path().string(), "ruler-m", a), Error);
}

TEST(Sweep, NiahGridAndHeatMap) {
  gguf_test::TempDir dir;
  SweepPlan plan;
  plan.benchmark = Benchmark::kNiah;
  plan.lengths = {600, 900};
  plan.depths = {0, 100};
  plan.methods = {{"full", std::nullopt, ""}};
  // Finds the needle only when it is at the end.
  const SampleExecutor late = [](const SweepMethod&, const TaskSample& s) {
    SampleRun run;
    if (s.depth_percent == 100) run.prediction = s.references[0];
    return run;
  };
  const std::string out = prepare_results_dir(dir.path().string(), "niah-test", ordered_json{{"x", 1}});
  EXPECT_EQ(run_sweep(plan, llama_generator(), late, out, nullptr), 4);
  write_reports(plan, out, {});
  const auto summary = nlohmann::json::parse(read(out + "/summary.json"));
  EXPECT_EQ(summary["niah_grids"][0]["scores"].dump(), "[[0.0,0.0],[10.0,10.0]]");
  EXPECT_EQ(summary["tables"][0]["rows"][0]["scores"]["600"], 5.0);
  EXPECT_EQ(summary["tables"][0]["rows"][0]["average"], 5.0);
  const std::string svg = read(out + "/niah-full.svg");
  EXPECT_EQ(svg.rfind("<?xml", 0), 0u);
  EXPECT_EQ(eval_test::count_of(svg, "fill=\"#F0496E\" stroke=\"white\""), 2u);  // the two 0 cells
  EXPECT_EQ(eval_test::count_of(svg, "fill=\"#0CD79F\" stroke=\"white\""), 2u);  // the two 10 cells
  EXPECT_NE(svg.find("full — average score 5.00"), std::string::npos);
  EXPECT_EQ(niah_score_colour(5), "#EBB839");
}

TEST(Sweep, LongBenchRowsAreScoredWithEachDatasetsMetricAndResumed) {
  gguf_test::TempDir dir;
  for (const char* dataset : {"trec", "hotpotqa"}) {
    std::ofstream out(dir.file(std::string(dataset) + ".jsonl"));
    for (int i = 0; i < 3; ++i) {
      out << ordered_json{{"input", "Q"}, {"context", "C"}, {"answers", {dataset == std::string("trec") ? "Entity" : "Paris"}},
                          {"length", 1}, {"dataset", dataset}, {"language", "en"},
                          {"all_classes", dataset == std::string("trec") ? ordered_json{"Entity", "Location"} : ordered_json()},
                          {"_id", std::to_string(i)}}
                 .dump()
          << "\n";
    }
  }
  LongBenchOptions options;
  options.data_dir = dir.path().string();
  options.datasets = {"trec", "hotpotqa"};
  options.samples = 2;
  const LongBenchSet set(test::llama_spm(), 4096, options);
  SweepPlan plan;
  plan.benchmark = Benchmark::kLongBench;
  plan.tasks = options.datasets;
  plan.samples = 2;
  plan.methods = {{"full", std::nullopt, ""}, {"snapkv", KvBudget::per_head(64), "64"}};
  // full answers "\n<answer>\nmore" (right after trec's first-line rule, half right for
  // hotpotqa's qa_f1 on the whole text); snapkv answers nothing.
  const SampleExecutor executor = [](const SweepMethod& m, const TaskSample& s) {
    SampleRun run;
    if (!m.budget) run.prediction = "\n" + s.references[0] + "\nmore";
    return run;
  };
  const std::string out = prepare_results_dir(dir.path().string(), "longbench-test", {{"benchmark", "longbench"}});
  EXPECT_EQ(run_sweep(plan, set, executor, out, nullptr), 8);  // 2 methods x 2 datasets x 2 rows
  EXPECT_EQ(run_sweep(plan, set, executor, out, nullptr), 0);
  EXPECT_THROW(run_sweep(plan, llama_generator(), executor, out, nullptr), Error);
  const std::vector<nlohmann::json> records = SampleLog::read(out + "/samples.jsonl");
  ASSERT_EQ(records.size(), 8u);
  EXPECT_EQ(records[0]["dataset"], "trec");
  EXPECT_EQ(records[0]["all_classes"].size(), 2u);
  write_reports(plan, out, {});
  const std::string md = read(out + "/summary.md");
  // hotpotqa: F1 of "paris more" against "paris" = 2/3 → 66.67; Avg. = round((100 + 66.67) / 2, 2).
  EXPECT_NE(md.find("| method | trec | hotpotqa | Avg. |\n| --- | ---: | ---: | ---: |\n"
                    "| full | 100.00 | 66.67 | 83.34 |\n| snapkv@64 | 0.00 | 0.00 | 0.00 |\n"),
            std::string::npos)
      << md;
  EXPECT_TRUE(std::filesystem::exists(out + "/cost-bars.svg"));
  EXPECT_FALSE(std::filesystem::exists(out + "/score-vs-budget.svg"));  // one budget only
}

}  // namespace
}  // namespace deferkv::eval
