// The sweep with several rows in flight (eval --server --concurrency K), without a model:
// the same rows as one at a time, rows really overlapping, a failed row recorded while the
// others run, and a stop (Ctrl-C) ending the sweep with the rows already done kept for a rerun.
// Mutants tried: run_concurrently ignoring `workers` (one at a time) fails
// RowsOverlapAndGiveTheRowsOfOneAtATime; dropping its stop after an exception (every job still
// starts) fails AStopEndsTheSweepAndARerunRunsTheRest.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <thread>

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "deferkv/error.h"
#include "deferkv/eval_sweep.h"
#include "eval/sweep/concurrent_jobs.h"
#include "eval/sweep/sample_log.h"
#include "tensor/gguf_test_util.h"
#include "tokenizer/tokenizer_test_util.h"

namespace deferkv::eval {
namespace {

// NIAH at 1K tokens, four depths, the full cache and SnapKV: eight rows.
SweepPlan plan_of_eight_rows() {
  SweepPlan plan;
  plan.benchmark = Benchmark::kNiah;
  plan.lengths = {1024};
  plan.depths = {0, 25, 50, 100};
  plan.methods = {{"full", std::nullopt, ""}, {"snapkv", KvBudget::per_head(64), "64"}};
  return plan;
}

// full answers with the needle, snapkv with half of it: the rows' scores differ.
SampleRun answer(const SweepMethod& m, const TaskSample& s) {
  const std::string& needle = s.references.front();
  SampleRun run;
  run.prediction = m.press == "full" ? needle : needle.substr(0, needle.size() / 2);
  return run;
}

// Key → (prediction, score) of every row in the folder.
std::map<std::string, std::pair<std::string, double>> rows_in(const std::string& dir) {
  std::map<std::string, std::pair<std::string, double>> rows;
  for (const std::string& file : SampleLog::files_in(dir)) {
    for (const nlohmann::json& r : SampleLog::read(file)) {
      EXPECT_TRUE(rows.emplace(SampleLog::key_of(r), std::make_pair(r["pred"], r["score"].get<double>())).second);
    }
  }
  return rows;
}

const TaskGenerator& generator() {
  static TaskGenerator g(test::llama_spm(), TaskOptions{});
  return g;
}

TEST(ConcurrentSweep, RowsOverlapAndGiveTheRowsOfOneAtATime) {
  const SweepPlan plan = plan_of_eight_rows();
  gguf_test::TempDir dir;  // one per test: the two runs take a folder each in it
  const std::string serial = dir.file("serial"), concurrent = dir.file("concurrent");
  std::filesystem::create_directories(serial);
  std::filesystem::create_directories(concurrent);
  EXPECT_EQ(run_sweep(plan, generator(), answer, serial, nullptr), 8);

  // The first two rows each wait (10 s at most) until both are in flight.
  std::mutex mutex;
  std::condition_variable changed;
  int in_flight = 0, max_in_flight = 0, started = 0;
  const SampleExecutor overlapping = [&](const SweepMethod& m, const TaskSample& s) {
    std::unique_lock lock(mutex);
    const bool first_two = started++ < 2;
    max_in_flight = std::max(max_in_flight, ++in_flight);
    changed.notify_all();
    if (first_two) changed.wait_for(lock, std::chrono::seconds(10), [&] { return max_in_flight >= 2; });
    --in_flight;
    return answer(m, s);
  };
  EXPECT_EQ(run_sweep(plan, generator(), overlapping, concurrent, nullptr, {}, 3), 8);
  EXPECT_GE(max_in_flight, 2);
  EXPECT_LE(max_in_flight, 3);
  const auto rows = rows_in(concurrent);
  EXPECT_EQ(rows.size(), 8u);
  EXPECT_EQ(rows, rows_in(serial));
}

TEST(ConcurrentSweep, AFailedRowIsRecordedWhileTheOthersRun) {
  const SweepPlan plan = plan_of_eight_rows();
  gguf_test::TempDir dir;
  std::atomic<int> calls{0};
  const SampleExecutor fails_third = [&](const SweepMethod& m, const TaskSample& s) {
    if (++calls == 3) fail("the server answered garbage");
    return answer(m, s);
  };
  EXPECT_EQ(run_sweep(plan, generator(), fails_third, dir.path().string(), nullptr, {}, 2), 8);
  EXPECT_EQ(calls.load(), 8);
  EXPECT_EQ(rows_in(dir.path().string()).size(), 7u);
  std::ifstream failures(dir.path() / "failures.jsonl");
  std::string line;
  ASSERT_TRUE(std::getline(failures, line));
  EXPECT_EQ(nlohmann::json::parse(line).at("error"), "the server answered garbage");
  EXPECT_FALSE(std::getline(failures, line));
}

// A stop (not a row's failure: Ctrl-C's exception) ends the sweep after the rows in flight.
TEST(ConcurrentSweep, AStopEndsTheSweepAndARerunRunsTheRest) {
  const SweepPlan plan = plan_of_eight_rows();
  gguf_test::TempDir dir;
  struct Stop {};
  std::atomic<int> calls{0};
  const SampleExecutor stops_at_third = [&](const SweepMethod& m, const TaskSample& s) {
    const int call = ++calls;
    if (call == 3) throw Stop{};
    // Rows after the stop take a while, as real ones do, so the stop is seen before the
    // other worker could take more than one more row.
    if (call > 3) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    return answer(m, s);
  };
  EXPECT_THROW(run_sweep(plan, generator(), stops_at_third, dir.path().string(), nullptr, {}, 2), Stop);
  // Beside the stopped row, the other worker's row in flight and at most one it took while
  // the stop was being raised; every row that returned is in the log.
  EXPECT_LE(calls.load(), 5);
  const size_t kept = rows_in(dir.path().string()).size();
  EXPECT_EQ(kept, static_cast<size_t>(calls.load() - 1));
  int reruns = 0;
  const SampleExecutor counted = [&](const SweepMethod& m, const TaskSample& s) {
    ++reruns;
    return answer(m, s);
  };
  EXPECT_EQ(run_sweep(plan, generator(), counted, dir.path().string(), nullptr, {}, 2), static_cast<int64_t>(8 - kept));
  EXPECT_EQ(reruns, static_cast<int>(8 - kept));
  EXPECT_EQ(rows_in(dir.path().string()).size(), 8u);
}

TEST(ConcurrentJobs, OneWorkerRunsTheJobsInOrderOnTheCallingThread) {
  std::vector<size_t> order;
  run_concurrently(4, 1, [&](size_t job) { order.push_back(job); });
  EXPECT_EQ(order, (std::vector<size_t>{0, 1, 2, 3}));
}

}  // namespace
}  // namespace deferkv::eval
