// The server's scheduler (the batch engine) on the embedded model: admission under a KV cap,
// cancellation, and each refusal of submit() typed by its cause.
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <future>
#include <mutex>
#include <optional>

#include "base/thread_pool.h"
#include "deferkv/error.h"
#include "deferkv/model.h"
#include "deferkv/tokenizer.h"
#include "server/batch_scheduler.h"
#include "server/test_server.h"

namespace deferkv::server {
namespace {

struct Finished {
  std::mutex mutex;
  std::condition_variable cv;
  std::vector<GenerationOutcome> outcomes;
  void add(const GenerationOutcome& o) {
    std::lock_guard lock(mutex);
    outcomes.push_back(o);
    cv.notify_all();
  }
  void wait_for(size_t n) {
    std::unique_lock lock(mutex);
    cv.wait(lock, [&] { return outcomes.size() >= n; });
  }
};

GenerationRequest greedy_request(const Model& model, int64_t max_tokens) {
  GenerationRequest r;
  r.prompt = model.tokenizer().encode("Once upon a time", true, false);
  r.max_tokens = max_tokens;
  r.sampling.temperature = 0;
  return r;
}

class BatchSchedulerTest : public ::testing::Test {
 protected:
  std::shared_ptr<const Model> model = Model::load(testing::stories_model_path());
  std::shared_ptr<ThreadPool> pool = std::make_shared<ThreadPool>(1);
  int64_t bytes_per_token() {
    BatchScheduler probe(model, pool, {.max_sequences = 1, .kv_capacity_bytes = 1});
    return probe.kv_bytes_per_token();
  }
};

// A cap that holds one request: with four places the others wait, and all complete.
TEST_F(BatchSchedulerTest, RequestsThatDoNotFitTogetherWaitAndAllComplete) {
  const GenerationRequest one = greedy_request(*model, 8);
  const int64_t need = static_cast<int64_t>(one.prompt.size() + 8) * bytes_per_token();
  BatchScheduler scheduler(model, pool, {.max_sequences = 4, .kv_capacity_bytes = need + need / 2});
  Finished finished;
  std::vector<SchedulerStats> seen_by_first;
  std::promise<void> all_submitted;
  std::shared_future<void> submitted = all_submitted.get_future().share();
  for (int i = 0; i < 3; ++i) {
    GenerationCallbacks cb;
    cb.on_token = [&, i](int32_t) {
      if (i == 0) {
        submitted.wait();
        seen_by_first.push_back(scheduler.stats());
      }
      return true;
    };
    cb.on_finish = [&](const GenerationOutcome& o) { finished.add(o); };
    scheduler.submit(greedy_request(*model, 8), std::move(cb));
  }
  all_submitted.set_value();
  finished.wait_for(3);
  ASSERT_FALSE(seen_by_first.empty());
  // While the first ran, nothing else fit beside it.
  EXPECT_EQ(seen_by_first.back().running, 1);
  EXPECT_EQ(seen_by_first.back().waiting, 2);
  EXPECT_LE(seen_by_first.back().kv_bytes_reserved, need + need / 2);
  for (const auto& o : finished.outcomes) {
    EXPECT_TRUE(o.error.empty()) << o.error;
    EXPECT_EQ(o.usage.completion_tokens, 8);
  }
  const SchedulerStats idle = scheduler.stats();
  EXPECT_EQ(idle.running + idle.waiting + idle.kv_bytes_used + idle.kv_bytes_reserved, 0);
}

// The refusal submit() threw, or nullopt when it queued the request.
std::optional<SubmitRefusal> refusal_of(Scheduler& scheduler, GenerationRequest request, GenerationCallbacks cb = {}) {
  try {
    scheduler.submit(std::move(request), std::move(cb));
  } catch (const SubmitError& e) {
    return e.refusal;
  }
  return std::nullopt;
}

TEST_F(BatchSchedulerTest, ARequestThatCanNeverFitIsRefused) {
  BatchScheduler scheduler(model, pool, {.max_sequences = 1, .kv_capacity_bytes = bytes_per_token() * 5});
  EXPECT_EQ(refusal_of(scheduler, greedy_request(*model, 8)), SubmitRefusal::kKvMemoryExceeded);
  EXPECT_EQ(scheduler.stats().waiting, 0);
}

// With its one slot busy and max_waiting (1) waiting, the next request is refused as
// kQueueFull, queueing nothing; after shutdown every submit is kShuttingDown.
TEST_F(BatchSchedulerTest, AFullQueueAndShutdownRefuseWithTheirOwnCause) {
  BatchScheduler scheduler(model, pool, {.max_sequences = 1, .kv_capacity_bytes = int64_t{64} << 20}, 1);
  Finished finished;
  std::promise<void> running;
  GenerationCallbacks first;
  first.on_start = [&] { running.set_value(); };
  first.on_finish = [&](const GenerationOutcome& o) { finished.add(o); };
  GenerationRequest long_one = greedy_request(*model, 400);
  long_one.stop_at_end_of_generation = false;
  ASSERT_EQ(refusal_of(scheduler, std::move(long_one), std::move(first)), std::nullopt);
  running.get_future().wait();  // out of the queue: the slot is taken
  GenerationCallbacks second;
  second.on_finish = [&](const GenerationOutcome& o) { finished.add(o); };
  ASSERT_EQ(refusal_of(scheduler, greedy_request(*model, 8), std::move(second)), std::nullopt);
  auto counted = [&] {  // a request queued against the test's expectation still ends cleanly
    GenerationCallbacks cb;
    cb.on_finish = [&](const GenerationOutcome& o) { finished.add(o); };
    return cb;
  };
  EXPECT_EQ(refusal_of(scheduler, greedy_request(*model, 8), counted()), SubmitRefusal::kQueueFull);
  EXPECT_EQ(scheduler.stats().waiting, 1);
  scheduler.cancel_all();
  EXPECT_EQ(refusal_of(scheduler, greedy_request(*model, 8), counted()), SubmitRefusal::kShuttingDown);
  finished.wait_for(2);
}

TEST_F(BatchSchedulerTest, CancellingStopsWithinOneToken) {
  BatchScheduler scheduler(model, pool, {.max_sequences = 1, .kv_capacity_bytes = int64_t{64} << 20});
  Finished finished;
  int tokens = 0;
  int cancelled_at = 0;
  std::atomic<RequestId> id{0};  // set once submit returns
  GenerationCallbacks cb;
  cb.on_token = [&](int32_t) {
    ++tokens;
    if (tokens >= 3 && cancelled_at == 0 && id != 0) {
      scheduler.cancel(id);
      cancelled_at = tokens;
    }
    return true;
  };
  cb.on_finish = [&](const GenerationOutcome& o) { finished.add(o); };
  id = scheduler.submit(greedy_request(*model, 200), std::move(cb));
  finished.wait_for(1);
  EXPECT_EQ(finished.outcomes[0].end, GenerationEnd::kCancelled);
  EXPECT_TRUE(finished.outcomes[0].started);
  ASSERT_GT(cancelled_at, 0);
  EXPECT_EQ(tokens, cancelled_at);  // no token after the one that cancelled
  EXPECT_LT(finished.outcomes[0].usage.completion_tokens, 200);
  EXPECT_EQ(scheduler.stats().kv_bytes_used, 0);
}

// Shutdown (cancel_all) ends the running request and the queued one as kShutdown, never as
// a normal end with a finish reason; only the running one had started.
TEST_F(BatchSchedulerTest, ShutdownEndsRunningAndQueuedRequestsAsShutdown) {
  BatchScheduler scheduler(model, pool, {.max_sequences = 1, .kv_capacity_bytes = int64_t{64} << 20});
  Finished finished;
  std::promise<void> first_token;
  std::atomic<int> started{0};
  for (int i = 0; i < 2; ++i) {
    GenerationCallbacks cb;
    cb.on_start = [&] { ++started; };
    cb.on_token = [&, i, told = false](int32_t) mutable {
      if (i == 0 && !told) {
        told = true;
        first_token.set_value();
      }
      return true;
    };
    cb.on_finish = [&](const GenerationOutcome& o) { finished.add(o); };
    scheduler.submit(greedy_request(*model, 400), std::move(cb));
  }
  first_token.get_future().wait();
  scheduler.cancel_all();
  finished.wait_for(2);
  ASSERT_EQ(finished.outcomes.size(), 2u);
  int ran = 0;
  for (const auto& o : finished.outcomes) {
    EXPECT_EQ(o.end, GenerationEnd::kShutdown);
    EXPECT_LT(o.usage.completion_tokens, 400);
    ran += o.started ? 1 : 0;
  }
  EXPECT_EQ(ran, 1);
  EXPECT_EQ(started, 1);
}

}  // namespace
}  // namespace deferkv::server
