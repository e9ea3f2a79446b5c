#include "press/methods/compactor/non_causal_attention.h"

#include <algorithm>
#include <cmath>

#include "base/thread_pool.h"
#include "deferkv/error.h"
#include "kernels/vec.h"
#include "kv/kv_cache.h"
#include "observe/attention_tap.h"

namespace deferkv {

void NonCausalChunks::begin(int64_t begin, int64_t end) {
  begin_ = begin;
  end_ = std::max(begin, end);
  layers_.clear();
}

void NonCausalChunks::add(const AttentionEvent& event) {
  if (event.phase != PassPhase::kPrompt) return;
  if (layers_.size() <= static_cast<size_t>(event.layer)) layers_.resize(static_cast<size_t>(event.layer) + 1);
  Layer& layer = layers_[static_cast<size_t>(event.layer)];
  const int64_t row = event.shape.n_head * event.shape.head_dim;
  if (layer.sums.empty()) layer.sums.assign(event.kv.size(), std::vector<double>(static_cast<size_t>(end_ - begin_), 0.0));
  for (int64_t i = 0; i < event.n; ++i) {
    const int64_t p = event.positions[i];
    if (p < begin_ || p >= end_) continue;
    const int64_t rows = static_cast<int64_t>(layer.pending.size()) / row;
    if (rows == 0) layer.pending_first = p;
    if (p != layer.pending_first + rows) {
      fail("internal: non-causal attention of layer {} expected position {}, got {}", event.layer,
           layer.pending_first + rows, p);
    }
    layer.pending.insert(layer.pending.end(), event.queries + i * row, event.queries + (i + 1) * row);
    // The chunk is complete at its last position (or the span's end): its keys are in the
    // cache now, this batch's included.
    const int64_t chunk_end = std::min(end_, begin_ + ((p - begin_) / chunk_ + 1) * chunk_);
    if (p + 1 == chunk_end) {
      score_chunk(event, layer, layer.pending_first, rows + 1);
      layer.pending.clear();
    }
  }
}

void NonCausalChunks::score_chunk(const AttentionEvent& event, Layer& layer, int64_t first, int64_t n) const {
  const int64_t d = event.shape.head_dim, heads = event.shape.n_head, kv_heads = event.shape.n_head_kv;
  const int64_t group = heads / kv_heads;
  // The chunk's keys of every KV head, as float32 rows.
  std::vector<std::vector<float>> keys(static_cast<size_t>(kv_heads), std::vector<float>(static_cast<size_t>(n * d)));
  for (int64_t g = 0; g < kv_heads; ++g) {
    const KvHeadView& head = event.kv[static_cast<size_t>(g)];
    const int32_t* at = std::lower_bound(head.positions, head.positions + head.length, static_cast<int32_t>(first));
    const int64_t index = at - head.positions;
    if (index + n > head.length || head.positions[index + n - 1] != first + n - 1) {
      fail("internal: the cache of layer {} KV head {} does not hold positions {}..{} in a row", event.layer, g, first,
           first + n - 1);
    }
    KvRowReader reader(head.keys);
    for (int64_t j = 0; j < n; ++j) {
      const float* k = reader(index + j);
      std::copy(k, k + d, keys[g].begin() + j * d);
    }
  }
  // Each query head sums its own column sums (work split over query heads, the most
  // parallel axis); they are added per KV head below in head order, so the result does
  // not depend on the threads.
  std::vector<std::vector<double>> partial(static_cast<size_t>(heads), std::vector<double>(static_cast<size_t>(n), 0.0));
  event.pool.parallel_for(heads, 1, [&](int64_t h_begin, int64_t h_end, int) {
    std::vector<double> p(static_cast<size_t>(n));
    for (int64_t h = h_begin; h < h_end; ++h) {
      const float* k = keys[static_cast<size_t>(h / group)].data();
      for (int64_t i = 0; i < n; ++i) {
        const float* q = layer.pending.data() + (i * heads + h) * d;
        double max = -INFINITY;
        for (int64_t j = 0; j < n; ++j) max = std::max(max, p[j] = dot_f32(q, k + j * d, d));
        double total = 0;
        for (int64_t j = 0; j < n; ++j) total += (p[j] = std::exp(p[j] - max));
        for (int64_t j = 0; j < n; ++j) partial[h][j] += p[j] / total;
      }
    }
  });
  // The mean over each KV head's query heads of the sum over the chunk's queries.
  for (int64_t h = 0; h < heads; ++h) {
    std::vector<double>& sums = layer.sums[static_cast<size_t>(h / group)];
    for (int64_t j = 0; j < n; ++j) sums[first - begin_ + j] += partial[h][j] / static_cast<double>(group);
  }
}

double NonCausalChunks::sum(int64_t layer, int64_t g, int64_t position) const {
  if (position < begin_ || position >= end_ || layers_.size() <= static_cast<size_t>(layer)) return 0.0;
  const Layer& l = layers_[static_cast<size_t>(layer)];
  if (l.sums.size() <= static_cast<size_t>(g)) return 0.0;
  return l.sums[static_cast<size_t>(g)][static_cast<size_t>(position - begin_)];
}

std::vector<double> NonCausalChunks::scores(const KvCache& cache, int64_t layer, int64_t g, int64_t from,
                                            int64_t to) const {
  const int64_t n = std::max<int64_t>(to - from, 0), d = cache.head_dim();
  KvRowReader value(cache.values(layer, g));
  const int32_t* positions = cache.positions(layer, g);
  std::vector<double> weighted(static_cast<size_t>(n));
  for (int64_t j = 0; j < n; ++j) {
    const float* v = value(from + j);
    double norm = 0;
    for (int64_t i = 0; i < d; ++i) norm += double(v[i]) * v[i];
    weighted[j] = sum(layer, g, positions[from + j]) * std::sqrt(norm);
  }
  std::vector<double> pooled(static_cast<size_t>(n));
  for (int64_t j = 0; j < n; ++j) {
    const double left = j > 0 ? weighted[j - 1] : 0.0, right = j + 1 < n ? weighted[j + 1] : 0.0;
    pooled[j] = (left + weighted[j] + right) / 3.0;
  }
  return pooled;
}

}  // namespace deferkv
