#include "press/one_shot_press.h"

#include <algorithm>

#include <spdlog/spdlog.h>

#include "deferkv/error.h"
#include "kernels/attention_tap.h"
#include "kv/kv_cache.h"
#include "press/selection.h"

namespace deferkv {

OneShotPress::OneShotPress(const PressParams& params, const KvBudget& budget, int64_t protected_window,
                           int64_t evict_at_step, CaptureConfig capture)
    : description_(params.describe()), budget_(budget), window_(protected_window),
      evict_at_step_(evict_at_step), capture_(std::move(capture)) {
  // Budget rules (docs/budgets.md): the window is always kept, so a budget below it cannot
  // be met and one equal to it selects nothing from the rest of the prompt.
  if (!budget.is_ratio() && budget.resolve(0) < window_) {
    fail("the KV budget of {} entries per head is smaller than the {} protected window entries of '{}': "
         "raise the budget to at least {}, or shrink the window (window=N in the press's parameters)",
         budget.resolve(0), window_, description_, window_);
  }
  if (!budget.is_ratio() && window_ > 0 && budget.resolve(0) == window_) {
    spdlog::warn("the KV budget of {} entries per head is the protected window of '{}': it keeps the last {} "
                 "prompt tokens and selects nothing from the rest of the prompt",
                 window_, description_, window_);
  }
  if (!capture_.window_weights.empty() &&
      static_cast<int64_t>(capture_.window_weights.size()) != capture_.window) {
    fail("internal: {} window weights for a window of {}", capture_.window_weights.size(), capture_.window);
  }
}

bool OneShotPress::will_evict() const {
  return pending_ && prompt_end_ > resolved_budget_ && prompt_end_ > window_;
}

void OneShotPress::on_prefill_begin(int64_t first_position, int64_t n_tokens) {
  prompt_end_ = first_position + n_tokens;
  resolved_budget_ = budget_.resolve(prompt_end_);
  if (budget_.is_ratio() && prompt_end_ > window_ && resolved_budget_ <= window_) {
    spdlog::warn("{} of a {}-token prompt is {} entries per head, not more than the {}-entry window of '{}': "
                 "only the window is kept",
                 budget_.describe(), prompt_end_, resolved_budget_, window_, description_);
  }
  pending_ = true;
  decode_origin_ = prompt_end_;
  prompt_attention_.clear();
  decode_attention_.assign(static_cast<size_t>(capture_.decode_steps), {});
  prompt_first_ = first_position;
}

void OneShotPress::on_attention(const AttentionEvent& event) {
  if (!will_evict()) return;
  const int64_t position = event.positions[0];
  if (position < prompt_end_) {
    capture_prompt(event);
  } else if (position >= decode_origin_) {
    const int64_t step = position - decode_origin_ + 1;
    if (step <= capture_.decode_steps) capture_decode(event, step);
  }
}

void OneShotPress::on_question(int64_t first_position, int64_t n_tokens) { decode_origin_ = first_position + n_tokens; }

namespace {

// Grows the per-head vectors of a layer to the heads' current lengths (new entries 0).
void fit_to_heads(std::vector<std::vector<std::vector<float>>>& store, const AttentionEvent& event) {
  if (store.size() <= static_cast<size_t>(event.layer)) store.resize(static_cast<size_t>(event.layer) + 1);
  auto& heads = store[static_cast<size_t>(event.layer)];
  heads.resize(event.kv.size());
  for (size_t g = 0; g < heads.size(); ++g) heads[g].resize(static_cast<size_t>(event.kv[g].length), 0.0f);
}

}  // namespace

void OneShotPress::capture_prompt(const AttentionEvent& event) {
  const int64_t window_start = prompt_end_ - capture_.window;
  const int64_t first_observed = capture_.all_prompt_queries ? prompt_first_ : window_start;
  // The batch's rows have consecutive positions; the observed ones are a suffix.
  const int64_t skip = std::clamp<int64_t>(first_observed - event.positions[0], 0, event.n);
  const int64_t m = event.n - skip;
  if (m <= 0 || (capture_.window == 0 && !capture_.all_prompt_queries)) return;
  std::vector<float> weights(static_cast<size_t>(m), 1.0f);
  if (!capture_.all_prompt_queries) {
    for (int64_t i = 0; i < m; ++i) {
      const int64_t age_index = event.positions[skip + i] - window_start;  // 0: the oldest window query
      weights[i] = capture_.window_weights.empty() ? 1.0f / static_cast<float>(capture_.window)
                                                   : capture_.window_weights[age_index];
    }
  }
  fit_to_heads(prompt_attention_, event);
  const int64_t stride = event.shape.n_head * event.shape.head_dim;
  const ObservedQueries queries{event.queries + skip * stride, stride, event.positions + skip, weights.data(), m};
  observe_attention(queries, event.shape, event.kv, capture_.rows, capture_.group,
                    prompt_attention_[static_cast<size_t>(event.layer)], event.pool);
}

void OneShotPress::capture_decode(const AttentionEvent& event, int64_t step) {
  auto& store = decode_attention_[static_cast<size_t>(step - 1)];
  fit_to_heads(store, event);
  const int64_t stride = event.shape.n_head * event.shape.head_dim;
  const ObservedQueries queries{event.queries, stride, event.positions, nullptr, 1};
  observe_attention(queries, event.shape, event.kv, capture_.rows, capture_.group,
                    store[static_cast<size_t>(event.layer)], event.pool);
}

void OneShotPress::on_prefill_end(KvCache& cache) {
  if (evict_at_step_ == 0) evict(cache);
}

void OneShotPress::on_decode_step(KvCache& cache, int64_t step) {
  if (step == evict_at_step_) evict(cache);
}

void OneShotPress::evict(KvCache& cache) {
  if (!will_evict()) {
    pending_ = false;
    return;
  }
  const int64_t n_layer = cache.n_layer(), n_kv = cache.n_head_kv();
  prompt_attention_.resize(static_cast<size_t>(n_layer));
  for (auto& step : decode_attention_) step.resize(static_cast<size_t>(n_layer));
  std::vector<std::vector<std::vector<float>>> decode_layer(decode_attention_.size());
  for (int64_t l = 0; l < n_layer; ++l) {
    prompt_attention_[l].resize(static_cast<size_t>(n_kv));
    for (size_t s = 0; s < decode_attention_.size(); ++s) {
      decode_layer[s] = std::move(decode_attention_[s][l]);
      decode_layer[s].resize(static_cast<size_t>(n_kv));
    }
    LayerEviction view{l, n_layer, prompt_end_, resolved_budget_, window_, {}, prompt_attention_[l],
                       decode_layer, cache};
    for (int64_t g = 0; g < n_kv; ++g) {
      const int32_t* positions = cache.positions(l, g);
      const int64_t len = cache.length(l, g);
      view.candidates.push_back(
          std::lower_bound(positions, positions + len, static_cast<int32_t>(prompt_end_ - window_)) - positions);
    }
    std::vector<std::vector<int32_t>> chosen = choose(view);
    for (int64_t g = 0; g < n_kv; ++g) {
      std::vector<int32_t>& keep = chosen[static_cast<size_t>(g)];
      std::sort(keep.begin(), keep.end());
      keep.erase(std::unique(keep.begin(), keep.end()), keep.end());
      const int64_t c = view.candidates[g];
      if (!keep.empty() && (keep.front() < 0 || keep.back() >= c)) {
        fail("internal: '{}' chose entry {} of layer {} head {} outside its {} candidates", description_,
             keep.front() < 0 ? keep.front() : keep.back(), l, g, c);
      }
      cache.retain(l, g, merge_indices(keep, index_range(c, cache.length(l, g))));
    }
    prompt_attention_[l] = {};
  }
  prompt_attention_.clear();
  decode_attention_.assign(decode_attention_.size(), {});
  pending_ = false;
}

}  // namespace deferkv
