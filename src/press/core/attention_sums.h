#pragma once
// A press's own store of captured attention, per layer, KV head and entry, for the methods
// that capture outside ScoredPress (SpecKV, CompressKV).
#include <cstdint>
#include <vector>

#include "observe/attention_observation.h"
#include "observe/attention_tap.h"

namespace deferkv {

using LayerAttention = std::vector<std::vector<std::vector<float>>>;  // [layer][g][entry]

// Reduces the attention of the event's rows from `skip` on into store[layer][g], grown to
// the heads' current entries (new ones start at 0). head_weights as ObservedQueries'.
void add_attention(const AttentionEvent& event, int64_t skip, RowReduction rows, GroupReduction group,
                   LayerAttention& store, const float* head_weights = nullptr);

}  // namespace deferkv
