#pragma once
// Where a Session stands. Each of its calls starts from the phases it names and leaves the
// session in a known one; a call from any other phase is an Error naming the call and the
// phase, so a driver or a press that steps out of order fails at the step, not later with a
// cache the press cannot match. The order of the values is that of Session's phase_ variant.
#include <cstdint>

namespace deferkv {

enum class SessionPhase : uint8_t {
  kIdle,            // between calls: anything may start
  kAttaching,       // set_press: the press's on_attach; the host takes its declarations
  kPrefilling,      // a prompt's forward passes (begin_prefill, feed_prompt)
  kPromptComplete,  // the whole prompt is in; end_prefill comes next
  kPromptEnd,       // end_prefill: the press's kPromptEnd; the host runs capabilities
  kCapability,      // a capability's forward passes, inside kPromptEnd
  kQuestion,        // prefill_question's forward pass
  kDecoding,        // one decode step: decode_segment, its forward pass, end_decode
};

// "idle", "prefilling a prompt", ...: for errors.
const char* session_phase_name(SessionPhase phase);

}  // namespace deferkv
