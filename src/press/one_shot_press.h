#pragma once
// The shared machinery of one-shot eviction (SnapKV and family, DeferKV, H2O, TOVA,
// KNorm, StreamingLLM, ...): capture the attention the method asks for while the
// prompt and the first decode steps run, then, at the trigger (end of prefill or decode
// step d), let the method choose per layer and KV head which evictable entries to keep,
// and compact the cache. A method file configures the capture, the protected window and
// the trigger, and implements choose().
//
// Entries of one head: the evictable candidates [0, C) are the prompt entries older
// than the protected window (position < T - window); the window and every decode token
// are always kept. The budget b counts prompt entries, the window included.
#include <cstdint>
#include <vector>

#include "deferkv/press.h"
#include "kernels/attention_observation.h"
#include "press/press_params.h"

namespace deferkv {

struct CaptureConfig {
  int64_t window = 0;               // observe the last `window` prompt queries
  bool all_prompt_queries = false;  // observe every prompt query (H2O)
  std::vector<float> window_weights;  // weight of window query i (oldest first); empty: 1/window
  RowReduction rows = RowReduction::kWeightedSum;
  GroupReduction group = GroupReduction::kMean;
  int64_t decode_steps = 0;  // observe the queries of decode steps 1..decode_steps
};

// What a method sees of one layer when the eviction fires.
struct LayerEviction {
  int64_t layer;
  int64_t n_layer;
  int64_t prompt_end;      // T: the position after the prompt's last token
  int64_t budget;          // b: prompt entries kept per KV head, window included
  int64_t window;          // protected prompt entries per head
  std::vector<int64_t> candidates;  // per KV head: C
  // Captured attention per KV head over the head's entries (at least C values each).
  const std::vector<std::vector<float>>& prompt_attention;
  // decode_attention[s - 1][g]: decode step s's query over head g's entries.
  const std::vector<std::vector<std::vector<float>>>& decode_attention;
  const KvCache& cache;

  int64_t n_head_kv() const { return static_cast<int64_t>(candidates.size()); }
  int64_t candidate_budget() const { return budget - window; }  // b - w
};

class OneShotPress : public Press {
 public:
  // evict_at_step: 0 evicts at the end of the prefill, d >= 1 after decode step d.
  OneShotPress(const PressParams& params, const KvBudget& budget, int64_t protected_window,
               int64_t evict_at_step, CaptureConfig capture);

  void on_prefill_begin(int64_t first_position, int64_t n_tokens) override;
  void on_attention(const AttentionEvent& event) override;
  void on_prefill_end(KvCache& cache) override;
  void on_decode_step(KvCache& cache, int64_t step) override;
  void on_question(int64_t first_position, int64_t n_tokens) override;
  std::string describe() const override { return description_; }

 protected:
  // Returns per KV head the candidate indices (in [0, C)) to keep, in any order.
  virtual std::vector<std::vector<int32_t>> choose(const LayerEviction& layer) = 0;
  // A prefill ran whose prompt is longer than the budget and the window, and its
  // eviction has not fired yet.
  bool will_evict() const;

 private:
  void capture_prompt(const AttentionEvent& event);
  void capture_decode(const AttentionEvent& event, int64_t step);
  void evict(KvCache& cache);

  std::string description_;
  KvBudget budget_;
  int64_t window_;
  int64_t evict_at_step_;
  CaptureConfig capture_;

  int64_t prompt_first_ = 0;  // first position of the last prefill
  int64_t prompt_end_ = 0;
  // Where decode step 1's token goes: the prompt's end, or the question's (question-agnostic
  // mode, whose question queries are neither window nor decode observers).
  int64_t decode_origin_ = 0;
  int64_t resolved_budget_ = 0;
  bool pending_ = false;  // a prefill ran and its eviction has not fired yet
  std::vector<std::vector<std::vector<float>>> prompt_attention_;  // [layer][g][entry]
  std::vector<std::vector<std::vector<std::vector<float>>>> decode_attention_;  // [step][layer][g][entry]
};

}  // namespace deferkv
