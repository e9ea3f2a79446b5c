#pragma once
// A session's prefill and decode step one step at a time, for a driver that runs several
// sessions together (the batch engine: other sequences decode between a prompt's feeds, and
// several sequences' decode steps share one forward pass). Session::prefill() and decode()
// are these steps run back to back. Each step checks the session's phase
// (engine/session_phase.h), so a step out of order is an Error naming it and the phase.
#include <cstdint>
#include <vector>

#include "deferkv/session.h"
#include "model/forward_pass.h"

namespace deferkv {

class Session::Driver {
 public:
  explicit Driver(Session& session) : s_(session) {}

  // Idle to prefilling: checks the prompt (and the press's declarations) and tells the press.
  void begin_prefill(const std::vector<int32_t>& tokens) { s_.begin_prefill(tokens); }
  // Runs about `layer_rows` rows x layers more of the prompt begun; true once it is all in
  // (then the prompt is complete). On an error the prompt's entries are taken back out, the
  // session is idle again and it throws.
  bool feed_prompt(const std::vector<int32_t>& tokens, int64_t layer_rows) {
    return s_.feed_prompt(tokens, layer_rows);
  }
  // The press's end of the prefill (PressPoint::kPromptEnd); then idle.
  void end_prefill(const std::vector<int32_t>& tokens) { s_.end_prefill(tokens); }

  // Idle to decoding: the step's rows for a forward pass (ForwardPass::run(segments)).
  // `token` must outlive the pass.
  ForwardSegment decode_segment(const int32_t& token) { return s_.decode_segment(token); }
  // After the pass (`seconds` long): the step counted, the press's kDecodeStep; then idle.
  void end_decode(double seconds) { s_.end_decode(seconds); }

  SessionPhase phase() const { return s_.phase(); }

 private:
  Session& s_;
};

using SessionDriver = Session::Driver;

}  // namespace deferkv
