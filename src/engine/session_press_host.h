#pragma once
// What a session offers its press (deferkv/press.h, PressHost): each capability once, for
// any method. The session's own code never asks which press it runs.
#include <functional>
#include <vector>

#include "deferkv/session.h"

namespace deferkv {

class Session::Host final : public PressHost {
 public:
  explicit Host(Session& session) : s_(session) {}

  void reserve_after_prompt(int64_t n_positions) override;
  void reserve_prompt_length_after_prompt(int64_t at_most) override;
  std::vector<int32_t> encode_text(const std::string& text) override;
  std::vector<PromptFrame> prompt_frames() override;
  const std::string& model_path() override;
  const std::vector<int32_t>& prompt_tokens() override;
  void use_draft_model() override;
  const ModelReadout& read_model_output(ResidualObserver observe) override;

  void greedy_lookahead(int64_t n_tokens, const std::function<void(KvCache&)>& prepare,
                        const AttentionObserver& observe) override;
  std::vector<int32_t> draft(int64_t n_tokens) override;
  void run_after_prompt(const std::vector<int32_t>& tokens, const AttentionObserver& observe) override;
  void run_after_prompt(const LookaheadRows& rows, const AttentionObserver& observe) override;
  void refeed_last_token() override;
  void continue_at(int64_t position) override;

 private:
  std::string press_name() const;
  // The declarations of the press being attached; fails outside on_attach.
  PressNeeds& attaching(const char* what) const;
  // The prompt whose end the press is at; fails outside kPromptEnd, and inside a
  // capability already running (one capability at a time).
  const std::vector<int32_t>& at_prefill_end(const char* what) const;
  // Runs forward passes for the press (their attention events stamped
  // PassPhase::kCapability), timed as its lookahead; their attention goes to `observe`
  // (null: to on_attention, as the prompt's own).
  void run_observed(const AttentionObserver* observe, const std::function<void()>& run);
  // n positions after the prompt, in batches of run_batch(first, positions, count); then
  // their entries go.
  void run_n_after_prompt(int64_t n, const AttentionObserver& observe,
                          const std::function<void(int64_t, const int32_t*, int64_t)>& run_batch);

  Session& s_;
};

}  // namespace deferkv
