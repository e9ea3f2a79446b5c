#pragma once
// The slots share one model and one thread pool, and the pool runs one parallel section
// at a time, so their forward passes take turns: first come, first served, one forward
// pass (a prefill or one decode step) per turn. A ticket lock, so a slot that just had a
// turn queues behind the others instead of taking the next one at once.
#include <condition_variable>
#include <cstdint>
#include <mutex>

namespace deferkv::server {

class ForwardTurns {
 public:
  void acquire();
  void release();

 private:
  std::mutex mutex_;
  std::condition_variable turn_;
  uint64_t next_ticket_ = 0;
  uint64_t serving_ = 0;
};

// Holds a turn for a scope.
class ForwardTurn {
 public:
  explicit ForwardTurn(ForwardTurns& turns) : turns_(turns) { turns_.acquire(); }
  ~ForwardTurn() { turns_.release(); }
  ForwardTurn(const ForwardTurn&) = delete;
  ForwardTurn& operator=(const ForwardTurn&) = delete;

 private:
  ForwardTurns& turns_;
};

}  // namespace deferkv::server
