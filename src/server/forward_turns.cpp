#include "server/forward_turns.h"

namespace deferkv::server {

void ForwardTurns::acquire() {
  std::unique_lock lock(mutex_);
  const uint64_t ticket = next_ticket_++;
  turn_.wait(lock, [&] { return serving_ == ticket; });
}

void ForwardTurns::release() {
  {
    std::lock_guard lock(mutex_);
    ++serving_;
  }
  turn_.notify_all();
}

}  // namespace deferkv::server
