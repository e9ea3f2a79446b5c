#include "press/methods/lookaheadkv/lookahead_attention.h"

#include <algorithm>

#include "observe/attention_tap.h"

namespace deferkv {

void LookaheadAttention::begin(int64_t prompt_end, float row_weight, GroupReduction group) {
  prompt_end_ = prompt_end;
  row_weight_ = row_weight;
  group_ = group;
  scores_.clear();
}

void LookaheadAttention::observe(const AttentionEvent& event) {
  // The batch's rows have consecutive positions; the lookahead ones are a suffix.
  const int64_t skip = std::clamp<int64_t>(prompt_end_ - event.positions[0], 0, event.n);
  const int64_t m = event.n - skip;
  if (m == 0) return;
  if (scores_.size() <= static_cast<size_t>(event.layer)) scores_.resize(static_cast<size_t>(event.layer) + 1);
  auto& heads = scores_[static_cast<size_t>(event.layer)];
  heads.resize(event.kv.size());
  std::vector<KvHeadView> prompt(event.kv.size());
  for (size_t g = 0; g < prompt.size(); ++g) {
    const KvHeadView& kv = event.kv[g];
    const int64_t entries =
        std::lower_bound(kv.positions, kv.positions + kv.length, static_cast<int32_t>(prompt_end_)) - kv.positions;
    prompt[g] = {kv.keys, kv.values, kv.positions, entries, 0, {}};
    heads[g].resize(static_cast<size_t>(entries), 0.0f);
  }
  weights_.assign(static_cast<size_t>(m), row_weight_);
  const int64_t stride = event.shape.n_head * event.shape.head_dim;
  const ObservedQueries queries{event.queries + skip * stride, stride, event.positions + skip, weights_.data(), m};
  observe_attention(queries, event.shape, prompt, RowReduction::kWeightedSum, group_, heads, event.pool);
}

const std::vector<std::vector<float>>& LookaheadAttention::layer(int64_t layer) const {
  static const std::vector<std::vector<float>> kNone;
  return static_cast<size_t>(layer) < scores_.size() ? scores_[static_cast<size_t>(layer)] : kNone;
}

}  // namespace deferkv
