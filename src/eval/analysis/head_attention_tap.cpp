#include "eval/analysis/head_attention_tap.h"

#include "observe/attention_observation.h"

namespace deferkv::eval {

HeadAttentionTap::HeadAttentionTap(int64_t first_position, Callback on_rows)
    : first_(first_position), on_rows_(std::move(on_rows)) {}

void HeadAttentionTap::on_attention(const AttentionEvent& event) {
  const int64_t d = event.shape.head_dim, group = event.shape.n_head / event.shape.n_head_kv;
  const int64_t stride = event.shape.n_head * d;
  for (int64_t i = 0; i < event.n; ++i) {
    if (event.positions[i] < first_) continue;
    std::vector<std::vector<float>> rows(static_cast<size_t>(event.shape.n_head));
    for (int64_t h = 0; h < event.shape.n_head; ++h) {
      // One query head as its own group of one, against its KV head.
      const KvHeadView& kv = event.kv[static_cast<size_t>(h / group)];
      std::vector<std::vector<float>> out = {std::vector<float>(static_cast<size_t>(kv.length), 0.0f)};
      observe_attention({event.queries + i * stride + h * d, stride, &event.positions[i], nullptr, 1},
                        {1, 1, d, event.shape.scale}, {kv}, RowReduction::kWeightedSum, GroupReduction::kSum, out,
                        event.pool);
      rows[static_cast<size_t>(h)] = std::move(out[0]);
    }
    on_rows_(event, i, rows);
  }
}

}  // namespace deferkv::eval
