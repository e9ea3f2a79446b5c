#pragma once
// What the forward pass shows an observer (a KV-compression press) after each layer's
// attention: the batch's queries and the layer's whole cache. Observers compute what
// they need from it (see attention_observation.h); when no observer is set the forward
// pass does nothing extra.
#include <cstdint>
#include <functional>
#include <vector>

#include "kernels/attention.h"
#include "kernels/rope.h"

namespace deferkv {

class ThreadPool;

// Which of a session's forward passes an event comes from: its prompt, a question after the
// context (Session::prefill_question), a decode step, or a pass a press capability runs
// (lookahead, draft, rows after the prompt, the last token fed again). The session stamps it
// on its segments (ForwardSegment), so an observer never infers it from the rows.
enum class PassPhase : uint8_t { kPrompt, kQuestion, kDecode, kCapability };

struct AttentionEvent {
  int64_t layer;
  int64_t n;                             // tokens in this forward pass
  const int32_t* positions;              // [n]
  const float* queries;                  // [n x n_head*head_dim], after RoPE
  AttentionShape shape;
  const std::vector<KvHeadView>& kv;     // the layer's cache, this batch included
  const Rotary& rotary;                  // the model's RoPE (queries and keys carry it)
  ThreadPool& pool;
  // A decode step's (n == 1) attention probabilities as the attention computed them, per
  // KV head (AttentionScratch::decode_probabilities); nullptr when not kept. observed_rows
  // passes them on.
  const std::vector<std::vector<float>>* probabilities = nullptr;
  PassPhase phase = PassPhase::kPrompt;
  int64_t step = 0;  // kDecode: the decode step (1: the first token fed after the prompt); else 0
};

using AttentionTap = std::function<void(const AttentionEvent&)>;

}  // namespace deferkv
