#include "press/core/attention_sums.h"

namespace deferkv {

void add_attention(const AttentionEvent& event, int64_t skip, RowReduction rows, GroupReduction group,
                   LayerAttention& store, const float* head_weights) {
  if (store.size() <= static_cast<size_t>(event.layer)) store.resize(static_cast<size_t>(event.layer) + 1);
  auto& heads = store[static_cast<size_t>(event.layer)];
  heads.resize(event.kv.size());
  for (size_t g = 0; g < heads.size(); ++g) heads[g].resize(static_cast<size_t>(event.kv[g].length), 0.0f);
  ObservedQueries queries = observed_rows(event, skip, nullptr);
  queries.head_weights = head_weights;
  observe_attention(queries, event.shape, event.kv, rows, group, heads, event.pool);
}

}  // namespace deferkv
