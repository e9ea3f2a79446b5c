// The sweep without a model: an executor that answers from the references (or not at
// all) shows the samples scored with the official metrics, the log resumed, the results
// folder tied to its configuration and the reports in the papers' layout.
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <map>
#include <fstream>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>

#include "deferkv/error.h"
#include "deferkv/eval_longbench.h"
#include "deferkv/eval_sweep.h"
#include "eval/eval_test_util.h"
#include "support/read_file.h"
#include "eval/plots/niah_heatmap.h"
#include "eval/sweep/sample_log.h"
#include "eval/sweep/shards.h"
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
  if (m.budget) run.candidate_pool = 256;  // as a pooled deferred press reports it
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
  EXPECT_EQ(records[1]["candidate_pool"], 256);
  EXPECT_FALSE(first.contains("candidate_pool"));  // a press without a pool records none
}

TEST(Sweep, ReportsPutMethodsInRowsAndTasksInColumns) {
  gguf_test::TempDir dir;
  const SweepPlan plan = ruler_plan();
  const ordered_json config = {{"benchmark", "ruler"}, {"seed", 42}};
  const std::string out = prepare_results_dir(dir.path().string(), "", "ruler-test", config);
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
            "label,method,kv_budget,kv_ratio,question_agnostic,task,length,score,samples,prompt_tokens,prefill_seconds,"
            "decode_tokens_per_second,capture_seconds,eviction_seconds,kv_bytes_after_eviction,peak_kv_bytes,peak_rss_bytes,failed,error");
  EXPECT_NE(csv.find("\nsnapkv@64,snapkv,64,,false,fwe,1024,33.33,2,"), std::string::npos) << csv;
  EXPECT_NE(csv.find("\nfull,full,,,false,niah_single_1,1024,100.00,2,"), std::string::npos) << csv;
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 5);  // the header + 2 methods x 2 tasks
  const auto summary = nlohmann::json::parse(read(out + "/summary.json"));
  EXPECT_EQ(summary["config"]["seed"], 42);
  EXPECT_EQ(summary["run"]["git_commit"], "abc");
  const auto& row = summary["tables"][0]["rows"][1];
  EXPECT_EQ(row["scores"]["fwe"], 33.33);
  EXPECT_EQ(row["cost"]["peak_kv_bytes"], 1000);
  EXPECT_EQ(row["cost"]["kv_bytes_after_eviction"], 400.0);
  EXPECT_EQ(row["cost"]["candidate_pool"], 256);
  EXPECT_TRUE(summary["tables"][0]["rows"][0]["cost"]["candidate_pool"].is_null());
  EXPECT_NE(md.find(" | 256 | "), std::string::npos) << md;  // the cost table's pool per head
  EXPECT_EQ(row["kv_budget"], 64);
  EXPECT_TRUE(row["kv_ratio"].is_null());
  // One length: no "Average by length" table repeating it.
  EXPECT_EQ(summary["tables"].size(), 1u);
}

TEST(Sweep, ResultsFolderIsNamedFromTheRowContextAndNeverTakenOver) {
  gguf_test::TempDir dir;
  const std::string parent = dir.path().string();
  const ordered_json a = {{"seed", 1}, {"model", {{"path", "/a/m.gguf"}, {"sha256", "ab"}}}, {"sweep", {{"samples", 2}}}};
  const std::string da = prepare_results_dir(parent, "", "ruler-m", a);
  EXPECT_EQ(std::filesystem::path(da).filename().string().rfind("ruler-m-", 0), 0u);
  EXPECT_EQ(std::filesystem::read_symlink(dir.file("latest")), std::filesystem::path(da).filename());
  // A grown grid, or the same model elsewhere: the same folder, its config.json the new one.
  ordered_json grown = a;
  grown["sweep"]["samples"] = 4;
  grown["model"]["path"] = "/b/m.gguf";
  EXPECT_EQ(prepare_results_dir(parent, "", "ruler-m", grown), da);
  EXPECT_EQ(nlohmann::json::parse(read(da + "/config.json"))["sweep"]["samples"], 4);
  // Any other field (one added tomorrow included) is another context: another folder.
  ordered_json other = a;
  other["cache_type_k"] = "q8_0";
  const std::string db = prepare_results_dir(parent, "", "ruler-m", other);
  EXPECT_NE(db, da);
  EXPECT_EQ(std::filesystem::read_symlink(dir.file("latest")), std::filesystem::path(db).filename());
  // --name: a readable folder, never given to another context.
  EXPECT_EQ(prepare_results_dir(parent, "mine", "ruler-m", a), parent + "/mine");
  try {
    prepare_results_dir(parent, "mine", "ruler-m", other);
    ADD_FAILURE() << "another context took the folder";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("differs in: cache_type_k"), std::string::npos) << e.what();
  }
  EXPECT_THROW(prepare_results_dir(parent, "latest", "ruler-m", a), Error);
  EXPECT_THROW(prepare_results_dir(parent, "a/b", "ruler-m", a), Error);
}

// Shards of one sweep start at the same time and prepare the same folder: each must find
// it absent or holding its config.json, never made but still empty. (Before the folder was
// made with its config in one rename, the second shard of CI's Slurm test failed so.)
TEST(Sweep, ShardsPreparingTheSameFolderAtOnceAllSucceed) {
  gguf_test::TempDir dir;
  const ordered_json config = {{"seed", 1}, {"sweep", {{"samples", 2}}}};
  for (int round = 0; round < 50; ++round) {
    const std::string parent = (dir.path() / std::to_string(round)).string();
    std::vector<std::string> made(4), errors(4);
    std::vector<std::thread> shards;
    for (size_t i = 0; i < made.size(); ++i) {
      shards.emplace_back([&, i] {
        try {
          made[i] = prepare_results_dir(parent, "", "ruler-m", config);
        } catch (const Error& e) {
          errors[i] = e.what();
        }
      });
    }
    for (auto& shard : shards) shard.join();
    for (size_t i = 0; i < made.size(); ++i) {
      ASSERT_EQ(errors[i], "") << "round " << round << ", shard " << i;
      EXPECT_EQ(made[i], made[0]);
    }
    EXPECT_EQ(nlohmann::json::parse(read(made[0] + "/config.json"))["seed"], 1);
    // Only the folder and `latest` are left: no temporary beside them.
    EXPECT_EQ(std::distance(std::filesystem::directory_iterator(parent), std::filesystem::directory_iterator()), 2);
  }
}

// The rows of `dir`, by key, as (prediction, score).
std::map<std::string, std::pair<std::string, double>> rows_of(const std::string& dir) {
  std::map<std::string, std::pair<std::string, double>> rows;
  for (const std::string& file : SampleLog::files_in(dir)) {
    for (const auto& r : SampleLog::read(file)) {
      EXPECT_TRUE(rows.emplace(SampleLog::key_of(r), std::pair(r["pred"].get<std::string>(), r["score"].get<double>())).second);
    }
  }
  return rows;
}

// The reports of `plan` on the rows in `dir`, as written (the answer() executor's costs are
// constants, so two folders with the same rows give the same bytes).
std::string reports_of(const SweepPlan& plan, const std::string& dir) {
  write_reports(plan, dir, {});
  return read(dir + "/summary.md") + read(dir + "/results.csv") +
         nlohmann::json::parse(read(dir + "/summary.json"))["tables"].dump();
}

TEST(Sweep, AGrownSweepRunsOnlyItsNewRowsAndReportsAsAFreshRun) {
  gguf_test::TempDir dir;
  int calls = 0;
  const SampleExecutor counted = [&](const SweepMethod& m, const TaskSample& s) {
    ++calls;
    return answer(m, s);
  };
  const ordered_json config = {{"benchmark", "ruler"}, {"seed", 42}};
  const std::string out = prepare_results_dir(dir.path().string(), "grown", "ruler-t", config);
  SweepPlan plan = ruler_plan();  // 2 tasks x 2 samples x (full, snapkv@64)
  EXPECT_EQ(run_sweep(plan, llama_generator(), counted, out, nullptr), 8);
  plan.samples = 4;
  EXPECT_EQ(run_sweep(plan, llama_generator(), counted, out, nullptr), 8);  // samples 2 and 3 only
  // Another press, and snapkv spelled with its defaults: the same press, so its rows are reused.
  plan.methods = {{"full", std::nullopt, ""},
                  {"snapkv:window=32,kernel=7,pooling=max,gqa=mean", KvBudget::per_head(64), "64"},
                  {"streaming_llm", KvBudget::per_head(64), "64"}};
  ASSERT_EQ(plan.methods[1].identity(), ruler_plan().methods[1].identity());
  EXPECT_EQ(run_sweep(plan, llama_generator(), counted, out, nullptr), 8);  // streaming_llm's 2 x 4
  EXPECT_EQ(calls, 24);
  EXPECT_EQ(run_sweep(plan, llama_generator(), counted, out, nullptr), 0);

  const std::string fresh = prepare_results_dir(dir.path().string(), "fresh", "ruler-t", config);
  EXPECT_EQ(run_sweep(plan, llama_generator(), answer, fresh, nullptr), 24);
  EXPECT_EQ(rows_of(out), rows_of(fresh));
  // The reports cover exactly the sweep asked for: a smaller one leaves the other rows out.
  const std::string grown_reports = reports_of(plan, out);
  EXPECT_EQ(grown_reports, reports_of(plan, fresh));
  EXPECT_NE(grown_reports.find("| streaming_llm@64 |"), std::string::npos);
  SweepPlan small = ruler_plan();
  EXPECT_NE(reports_of(small, out), grown_reports);
  EXPECT_EQ(nlohmann::json::parse(read(out + "/summary.json"))["tables"][0]["rows"][0]["cost"]["samples"], 4);
}

TEST(Sweep, ShardsAreDisjointBalancedMixLengthsAndResume) {
  // Hand-dealt: rows 3-5 (cost 2) first, then 0-2; turn 1,2 | 2,1 | 1,2.
  EXPECT_EQ(shard_of_rows({1, 1, 1, 2, 2, 2}, 2), (std::vector<int64_t>{1, 1, 2, 1, 2, 2}));
  EXPECT_EQ(shard_of_rows({5, 5, 5}, 1), (std::vector<int64_t>{1, 1, 1}));
  EXPECT_EQ(Shard::parse("2/4").log_name(), "samples.shard-2-of-4.jsonl");
  EXPECT_EQ(Shard::parse("1/1").log_name(), "samples.jsonl");
  for (const char* bad : {"0/2", "3/2", "2", "a/b", "1/0"}) EXPECT_THROW(Shard::parse(bad), Error) << bad;

  gguf_test::TempDir dir;
  SweepPlan plan;
  plan.benchmark = Benchmark::kNiah;
  plan.lengths = {600, 900};
  plan.depths = {0, 50, 100};
  plan.methods = {{"full", std::nullopt, ""}, {"snapkv", KvBudget::per_head(64), "64"}};
  std::map<int64_t, std::map<int64_t, int>> by_shard;  // shard → length → rows run
  std::map<int64_t, std::map<std::string, int>> methods_by_shard;
  const std::string out = dir.path().string();
  for (int64_t i = 1; i <= 2; ++i) {
    const SampleExecutor counted = [&, i](const SweepMethod& m, const TaskSample& s) {
      ++by_shard[i][s.target_length];
      ++methods_by_shard[i][m.label()];
      return answer(m, s);
    };
    EXPECT_EQ(run_sweep(plan, llama_generator(), counted, out, nullptr, Shard{i, 2}), 6);
  }
  // 12 rows: each shard 3 of each length and 3 of each method.
  for (int64_t i = 1; i <= 2; ++i) {
    EXPECT_EQ(by_shard[i][600], 3) << i;
    EXPECT_EQ(by_shard[i][900], 3) << i;
    EXPECT_EQ(methods_by_shard[i]["full"], 3) << i;
  }
  EXPECT_EQ(lines_of(out + "/samples.shard-1-of-2.jsonl"), 6u);
  EXPECT_EQ(rows_of(out).size(), 12u);  // rows_of fails on a row in two files
  // Everything is done: an unsharded run, or another split, runs nothing.
  EXPECT_EQ(run_sweep(plan, llama_generator(), answer, out, nullptr), 0);
  EXPECT_EQ(run_sweep(plan, llama_generator(), answer, out, nullptr, Shard{2, 3}), 0);
  // A shard killed mid-line loses that line only, and goes on from there.
  const std::string log = out + "/samples.shard-2-of-2.jsonl";
  const std::string text = read(log);
  std::ofstream(log, std::ios::binary | std::ios::trunc) << text.substr(0, text.rfind('\n', text.size() - 2) + 1)
                                                        << R"({"label":"fu)";
  EXPECT_EQ(run_sweep(plan, llama_generator(), answer, out, nullptr, Shard{2, 2}), 1);
  EXPECT_EQ(read(log), text);
}

// A sharded sweep in one folder, and its unsharded twin.
struct ShardedSweep {
  gguf_test::TempDir dir;
  SweepPlan plan = ruler_plan();
  ordered_json config = {{"benchmark", "ruler"},
                         {"model", {{"path", "/here/m.gguf"}, {"sha256", "ab"}}},
                         {"seed", 42},
                         {"sweep", sweep_config(plan)}};
  std::string shared = prepare_results_dir(dir.path().string(), "shared", "ruler-t", config);
  ShardedSweep() {
    for (int64_t i = 1; i <= 2; ++i) run_sweep(plan, llama_generator(), answer, shared, nullptr, Shard{i, 2});
  }
};

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(Sweep, MergedShardsEqualTheUnshardedRun) {
  ShardedSweep s;
  const std::string single = prepare_results_dir(s.dir.path().string(), "single", "ruler-t", s.config);
  EXPECT_EQ(run_sweep(s.plan, llama_generator(), answer, single, nullptr), 8);
  const std::string merged = s.dir.file("merged");
  const SweepPlan plan = merge_results({s.shared}, merged);
  EXPECT_EQ(sweep_config(plan), sweep_config(s.plan));
  EXPECT_EQ(lines_of(merged + "/samples.jsonl"), 8u);
  EXPECT_EQ(rows_of(merged), rows_of(single));
  EXPECT_EQ(reports_of(plan, merged), reports_of(s.plan, single));
  // Shards in folders of their own (another machine's model path) merge the same way.
  ordered_json elsewhere = s.config;
  elsewhere["model"]["path"] = "/elsewhere/m.gguf";
  const std::string second = prepare_results_dir(s.dir.path().string(), "second", "ruler-t", elsewhere);
  std::filesystem::rename(s.shared + "/samples.shard-2-of-2.jsonl", second + "/samples.shard-2-of-2.jsonl");
  merge_results({s.shared, second}, s.dir.file("merged2"));
  EXPECT_EQ(rows_of(s.dir.file("merged2")), rows_of(single));
  EXPECT_NE(error_of([&] { merge_results({s.shared, second}, merged); }).find("already holds results"), std::string::npos);
}

TEST(Sweep, MergeNamesTheMissingOrDuplicatedSampleAndTheStrayShard) {
  ShardedSweep s;
  const std::string shard2 = s.shared + "/samples.shard-2-of-2.jsonl";
  const std::string text = read(shard2);
  // A sample missing: its shard is named.
  std::ofstream(shard2, std::ios::binary | std::ios::trunc) << text.substr(text.find('\n') + 1);
  const std::string missing = error_of([&] { merge_results({s.shared}, s.dir.file("m1")); });
  EXPECT_NE(missing.find("(shard 2/2's) is in none of"), std::string::npos) << missing;
  EXPECT_NE(missing.find("sample "), std::string::npos) << missing;
  // A sample twice: both shards are named.
  std::ofstream(shard2, std::ios::binary | std::ios::trunc) << text << read(s.shared + "/samples.shard-1-of-2.jsonl");
  const std::string twice = error_of([&] { merge_results({s.shared}, s.dir.file("m2")); });
  EXPECT_NE(twice.find("is in two shards: shard 1/2"), std::string::npos) << twice;
  EXPECT_NE(twice.find("and shard 2/2"), std::string::npos) << twice;
  // A shard of another configuration.
  ordered_json other = s.config;
  other["seed"] = 7;
  const std::string stray = prepare_results_dir(s.dir.path().string(), "stray", "ruler-t", other);
  const std::string mixed = error_of([&] { merge_results({s.shared, stray}, s.dir.file("m3")); });
  EXPECT_NE(mixed.find("'" + stray + "' holds another configuration"), std::string::npos) << mixed;
  EXPECT_NE(error_of([&] { merge_results({s.dir.file("nothing")}, s.dir.file("m4")); }).find("has no config.json"),
            std::string::npos);
}

TEST(Sweep, TwoProcessesNeverAppendToOneFile) {
  gguf_test::TempDir dir;
  const std::string out = dir.path().string();
  {
    // flock locks belong to an open file: a second open, here as in another process, is refused.
    SampleLog first(out + "/samples.jsonl");
    const std::string refused = error_of([&] { run_sweep(ruler_plan(), llama_generator(), answer, out, nullptr); });
    EXPECT_NE(refused.find("'" + out + "' is in use: another process (pid " + std::to_string(::getpid())),
              std::string::npos) << refused;
    EXPECT_NE(refused.find("is appending to samples.jsonl"), std::string::npos) << refused;
    EXPECT_EQ(read(out + "/samples.jsonl"), "");
    // Another shard has a file of its own.
    EXPECT_EQ(run_sweep(ruler_plan(), llama_generator(), answer, out, nullptr, Shard{2, 2}), 4);
  }
  // Released when the first one is done.
  EXPECT_EQ(run_sweep(ruler_plan(), llama_generator(), answer, out, nullptr), 4);
  EXPECT_FALSE(std::filesystem::exists(out + "/samples.jsonl.owner"));
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
  const std::string out = prepare_results_dir(dir.path().string(), "", "niah-test", ordered_json{{"x", 1}});
  std::FILE* progress = std::tmpfile();
  EXPECT_EQ(run_sweep(plan, llama_generator(), late, out, progress), 4);
  std::rewind(progress);
  std::string lines(4096, '\0');
  lines.resize(std::fread(lines.data(), 1, lines.size(), progress));
  std::fclose(progress);
  // Everything on 0-100, as RULER and LongBench: the progress lines, tables and grids (mutant
  // tried: the progress line showing the 0-10 sample score).
  EXPECT_NE(lines.find("full niah 900 depth 100% score 100.0 |"), std::string::npos) << lines;
  EXPECT_NE(lines.find("full niah 900 depth 0% score 0.0 |"), std::string::npos) << lines;
  write_reports(plan, out, {});
  const auto summary = nlohmann::json::parse(read(out + "/summary.json"));
  EXPECT_EQ(summary["niah_grids"][0]["scores"].dump(), "[[0.0,0.0],[100.0,100.0]]");
  EXPECT_EQ(summary["tables"][0]["rows"][0]["scores"]["600"], 50.0);
  EXPECT_EQ(summary["tables"][0]["rows"][0]["average"], 50.0);
  const std::string svg = read(out + "/niah-full.svg");
  EXPECT_EQ(svg.rfind("<?xml", 0), 0u);
  EXPECT_EQ(eval_test::count_of(svg, "fill=\"#F0496E\" stroke=\"white\""), 2u);  // the two 0 cells
  EXPECT_EQ(eval_test::count_of(svg, "fill=\"#0CD79F\" stroke=\"white\""), 2u);  // the two 100 cells
  EXPECT_NE(svg.find("full — average score 50.00"), std::string::npos);
  EXPECT_EQ(niah_score_colour(50), "#EBB839");
  EXPECT_NE(read(out + "/summary.md").find("x 100 (0-100)"), std::string::npos);
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
  const std::string out = prepare_results_dir(dir.path().string(), "", "longbench-test", {{"benchmark", "longbench"}});
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
