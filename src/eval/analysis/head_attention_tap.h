#pragma once
// A press that evicts nothing and hands, for every query at or after a position, each
// query head's attention over its KV head's entries to a callback: what the
// diagnostics and calibrations read from a full-cache run.
#include <cstdint>
#include <functional>
#include <vector>

#include "deferkv/press.h"
#include "deferkv/session.h"
#include "observe/attention_tap.h"

namespace deferkv::eval {

class HeadAttentionTap final : public Press {
 public:
  // rows[h][entry] for query `row` of the event.
  using Callback = std::function<void(const AttentionEvent& event, int64_t row, const std::vector<std::vector<float>>& rows)>;
  HeadAttentionTap(int64_t first_position, Callback on_rows);

  std::string describe() const override { return "full"; }
  void on_attention(const AttentionEvent& event) override;
  PressPoints points() const override { return {}; }  // it only observes
  void act(const PressAt&, KvCache&) override {}

 private:
  int64_t first_;
  Callback on_rows_;
};

// Sets a tap on a session for one scope: the tap's callback refers to the caller's
// locals, so it must not outlive them, even when an error leaves the scope.
class ScopedTap {
 public:
  ScopedTap(Session& session, std::unique_ptr<Press> tap) : session_(session) { session_.set_press(std::move(tap)); }
  ~ScopedTap() { session_.set_press(nullptr); }
  ScopedTap(const ScopedTap&) = delete;
  ScopedTap& operator=(const ScopedTap&) = delete;

 private:
  Session& session_;
};

}  // namespace deferkv::eval
