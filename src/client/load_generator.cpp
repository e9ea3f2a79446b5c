#include "client/load_generator.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "client/prometheus_text.h"
#include "deferkv/error.h"

namespace deferkv::client {
namespace {

// Reads /metrics every `period` until stopped, keeping the peaks.
class MetricsPoller {
 public:
  MetricsPoller(const OpenAiClient& client, double period) : client_(client), period_(period) {
    if (period_ > 0) thread_ = std::thread([this] { loop(); });
  }
  // Stops after one last poll, so that a run shorter than a period is seen too.
  ServerPeaks finish() {
    if (thread_.joinable()) {
      {
        std::lock_guard lock(mutex_);
        stop_ = true;
      }
      wake_.notify_all();
      thread_.join();
    }
    return peaks_;
  }
  ~MetricsPoller() { finish(); }

 private:
  void loop() {
    std::unique_lock lock(mutex_);
    for (;;) {
      const bool last = stop_;
      lock.unlock();
      poll();
      lock.lock();
      if (last) return;
      wake_.wait_for(lock, std::chrono::duration<double>(period_), [this] { return stop_; });
    }
  }
  void poll() {
    const std::optional<std::string> text = client_.metrics();
    if (!text) return;
    const auto running = metric_value(*text, "deferkv_requests_running");
    if (!running) return;  // not deferkv serve's metrics
    auto value = [&](const char* name) { return static_cast<int64_t>(metric_value(*text, name).value_or(0)); };
    peaks_.available = true;
    ++peaks_.polls;
    peaks_.max_running = std::max(peaks_.max_running, static_cast<int64_t>(*running));
    peaks_.max_waiting = std::max(peaks_.max_waiting, value("deferkv_requests_waiting"));
    peaks_.max_kv_bytes_used = std::max(peaks_.max_kv_bytes_used, value("deferkv_kv_bytes_used"));
    peaks_.kv_bytes_capacity = value("deferkv_kv_bytes_capacity");
  }

  const OpenAiClient& client_;
  double period_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  ServerPeaks peaks_;  // written by the poller's thread only, read after it joined
  std::thread thread_;
};

}  // namespace

LoadRun run_load(const OpenAiClient& client, const std::vector<nlohmann::json>& bodies, const LoadOptions& options) {
  if (options.clients < 1) fail("the load generator needs at least 1 client (got {})", options.clients);
  LoadRun run;
  run.requests.resize(bodies.size());
  std::atomic<size_t> next{0};
  MetricsPoller poller(client, options.metrics_poll_seconds);
  const auto start = std::chrono::steady_clock::now();
  auto since_start = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  std::vector<std::thread> threads;
  for (int c = 0; c < options.clients; ++c) {
    threads.emplace_back([&, c] {
      for (size_t i = next++; i < bodies.size(); i = next++) {
        SentRequest& r = run.requests[i];
        r.index = i;
        r.client = c;
        r.sent_seconds = since_start();
        r.answer = client.stream(bodies[i], options.chat);
        if (options.check_press && r.answer.error.empty()) r.answer.error = press_mismatch(bodies[i], r.answer.usage);
      }
    });
  }
  for (auto& t : threads) t.join();
  run.wall_seconds = since_start();
  run.server = poller.finish();
  return run;
}

}  // namespace deferkv::client
