#include "observe/attention_observation.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "base/thread_pool.h"
#include "kernels/vec.h"

namespace deferkv {
namespace {

constexpr int64_t kColumnBlock = 256;
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// The rows of one KV head's group: query head (group-local) a, observed query i is row
// a * m + i, copied contiguous so one GEMM scores the whole group against a key block.
struct GroupRows {
  std::vector<float> queries;  // [rows x head_dim]
  std::vector<int64_t> visible;  // entries row r can see
  std::vector<float> lse;        // log-sum-exp of row r over its visible entries
};

// A buffer of at least n floats owned by the calling thread, kept between calls so the
// decode loop does not allocate (and fault in fresh pages) every step.
float* thread_scratch(int64_t n) {
  thread_local std::vector<float> buffer;
  if (static_cast<int64_t>(buffer.size()) < n) buffer.resize(static_cast<size_t>(n));
  return buffer.data();
}

int64_t visible_entries(const KvHeadView& kv, int32_t position) {
  return std::upper_bound(kv.positions, kv.positions + kv.length, position) - kv.positions;
}

// The block's scaled scores, float32 products against the stored keys (dequantised into
// `tile` unless f32): row r, column c (= scale * q_r . k_{c0 + c}) at scores[r * width + c].
void score_block(const GroupRows& g, int64_t rows, const KvHeadView& kv, int64_t head_dim, float scale, int64_t c0,
                 int64_t width, float* scores, float* tile) {
  kv_key_scores(g.queries.data(), head_dim, rows, kv.keys, c0, width, scores, width, tile);
  scale_f32(scale, scores, rows * width);
}

// The attention's kept probabilities of each KV head when they serve this one query (it
// sees every entry, and they were kept for these heads' lengths), else nullptr.
std::vector<const float*> kept_probabilities(const ObservedQueries& q, int64_t group, const std::vector<KvHeadView>& kv) {
  std::vector<const float*> out(kv.size(), nullptr);
  if (q.probabilities == nullptr || q.probabilities->size() != kv.size()) return out;
  for (size_t g = 0; g < kv.size(); ++g) {
    const std::vector<float>& p = (*q.probabilities)[g];
    if (static_cast<int64_t>(p.size()) != group * kv[g].length || visible_entries(kv[g], q.positions[0]) != kv[g].length) {
      return std::vector<const float*>(kv.size(), nullptr);
    }
    out[g] = p.data();
  }
  return out;
}

// dst[c] = row-reduce(dst[c], group-reduce over a of head_acc[a * ld + c] * head weight a)
// for c < width; probabilities are >= 0, so 0 also starts a max. `reduced`: width floats
// of scratch. Without head weights a sum or mean runs as vector passes over the columns,
// adding the heads in the same order, so it rounds as the column-by-column loop does.
void reduce_group(const float* head_acc, int64_t ld, int64_t group, int64_t width, const float* head_weights,
                  GroupReduction group_reduction, RowReduction row_reduction, float* reduced, float* dst) {
  if (head_weights == nullptr && group_reduction != GroupReduction::kMax) {
    std::copy(head_acc, head_acc + width, reduced);  // 0 + x, exactly x
    for (int64_t a = 1; a < group; ++a) add_f32(head_acc + a * ld, reduced, width);
    if (group_reduction == GroupReduction::kMean) divide_f32(reduced, static_cast<float>(group), width);
    if (row_reduction == RowReduction::kWeightedSum) {
      add_f32(reduced, dst, width);
      return;
    }
    for (int64_t c = 0; c < width; ++c) dst[c] = std::max(dst[c], reduced[c]);
    return;
  }
  for (int64_t c = 0; c < width; ++c) {
    float v = 0.0f;
    for (int64_t a = 0; a < group; ++a) {
      const float x = head_acc[a * ld + c] * (head_weights != nullptr ? head_weights[a] : 1.0f);
      v = group_reduction == GroupReduction::kMax ? std::max(v, x) : v + x;
    }
    if (group_reduction == GroupReduction::kMean) v /= static_cast<float>(group);
    dst[c] = row_reduction == RowReduction::kMax ? std::max(dst[c], v) : dst[c] + v;
  }
}

// One query (a decode step, or the last prompt query): each query head's whole row of
// probabilities at once, by the decode attention's own attention_probabilities, so the
// attention's kept probabilities serve as they are and the two give the same floats.
void observe_one_query(const ObservedQueries& q, const AttentionShape& shape, const std::vector<KvHeadView>& kv,
                       RowReduction row_reduction, GroupReduction group_reduction,
                       std::vector<std::vector<float>>& out, ThreadPool& pool) {
  const int64_t n_kv = shape.n_head_kv;
  const int64_t group = shape.n_head / n_kv;
  const int64_t d = shape.head_dim;
  const std::vector<const float*> kept = kept_probabilities(q, group, kv);
  // A row's weight scales a sum (w * p: 0 + w * p exactly); a max of one row is the row.
  const float weight = q.weights != nullptr && row_reduction == RowReduction::kWeightedSum ? q.weights[0] : 1.0f;
  int64_t longest = 0;
  for (const KvHeadView& head : kv) longest = std::max(longest, head.length);
  const int64_t item_work = group * longest * (kept[0] != nullptr ? 1 : d);
  const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 16) / std::max<int64_t>(1, item_work));
  pool.parallel_for(n_kv, grain, [&](int64_t begin, int64_t end, int) {
    float* rows = thread_scratch(group * longest + kKvTileFloats + longest);
    float* tile = rows + group * longest;
    float* reduced = tile + kKvTileFloats;
    for (int64_t g = begin; g < end; ++g) {
      const KvHeadView& head = kv[static_cast<size_t>(g)];
      const int64_t len = head.length;
      const int64_t from = q.from != nullptr ? std::clamp<int64_t>(q.from[g], 0, len) : 0;
      if (from == len) continue;
      const float* probs = kept[static_cast<size_t>(g)];
      if (probs == nullptr) {
        attention_probabilities(q.queries + g * group * d, group, head, d, shape.scale,
                                visible_entries(head, q.positions[0]), rows, tile);
        probs = rows;
      }
      if (weight != 1.0f) {
        if (probs != rows) std::copy(probs, probs + group * len, rows);
        scale_f32(weight, rows, group * len);
        probs = rows;
      }
      reduce_group(probs + from, len, group, len - from, q.head_weights != nullptr ? q.head_weights + g * group : nullptr,
                   group_reduction, row_reduction, reduced, out[static_cast<size_t>(g)].data() + from);
    }
  });
}

}  // namespace

ObservedQueries observed_rows(const AttentionEvent& event, int64_t skip, const float* weights) {
  const int64_t stride = event.shape.n_head * event.shape.head_dim;
  ObservedQueries q{event.queries + skip * stride, stride, event.positions + skip, weights, event.n - skip};
  if (event.n == 1 && skip == 0) q.probabilities = event.probabilities;
  return q;
}

void observe_attention(const ObservedQueries& q, const AttentionShape& shape,
                       const std::vector<KvHeadView>& kv, RowReduction row_reduction,
                       GroupReduction group_reduction, std::vector<std::vector<float>>& out,
                       ThreadPool& pool) {
  if (q.m == 1) {
    observe_one_query(q, shape, kv, row_reduction, group_reduction, out, pool);
    return;
  }
  const int64_t n_kv = shape.n_head_kv;
  const int64_t group = shape.n_head / n_kv;
  const int64_t d = shape.head_dim;
  const int64_t rows = group * q.m;

  std::vector<GroupRows> groups(static_cast<size_t>(n_kv));
  int64_t max_blocks = 0;
  for (int64_t g = 0; g < n_kv; ++g) {
    GroupRows& gr = groups[static_cast<size_t>(g)];
    gr.queries.resize(static_cast<size_t>(rows * d));
    gr.visible.resize(static_cast<size_t>(rows));
    gr.lse.assign(static_cast<size_t>(rows), kNegInf);
    for (int64_t a = 0; a < group; ++a) {
      for (int64_t i = 0; i < q.m; ++i) {
        const float* src = q.queries + i * q.stride + (g * group + a) * d;
        std::copy(src, src + d, gr.queries.begin() + (a * q.m + i) * d);
        gr.visible[static_cast<size_t>(a * q.m + i)] = visible_entries(kv[static_cast<size_t>(g)], q.positions[i]);
      }
    }
    max_blocks = std::max(max_blocks, (kv[static_cast<size_t>(g)].length + kColumnBlock - 1) / kColumnBlock);
  }
  if (max_blocks == 0) return;

  // Items too small to repay waking a worker are grouped (about 64K multiply-adds each).
  const int64_t item_work = rows * kColumnBlock * d;
  const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 16) / std::max<int64_t>(1, item_work));
  // Calls fn(g, b, c0, width, block, extra) for every (KV head g, column block b) in
  // parallel (with wanted_only, the blocks holding a wanted entry): `block` holds the
  // block's scaled scores [rows x width], and `extra` extra_floats of the thread's scratch.
  auto for_each_block = [&](int64_t extra_floats, bool wanted_only, const auto& fn) {
    pool.parallel_for(n_kv * max_blocks, grain, [&](int64_t begin, int64_t end, int) {
      float* scores = thread_scratch(rows * kColumnBlock + kKvTileFloats + extra_floats);
      float* tile = scores + rows * kColumnBlock;
      for (int64_t item = begin; item < end; ++item) {
        const int64_t g = item / max_blocks, b = item % max_blocks;
        const KvHeadView& head = kv[static_cast<size_t>(g)];
        const int64_t c0 = b * kColumnBlock;
        const int64_t width = std::min(kColumnBlock, head.length - c0);
        if (width <= 0 || (wanted_only && q.from != nullptr && c0 + width <= q.from[g])) continue;
        score_block(groups[static_cast<size_t>(g)], rows, head, d, shape.scale, c0, width, scores, tile);
        fn(g, b, c0, width, scores, tile + kKvTileFloats);
      }
    });
  };

  // Pass 1: per (group, block) each row's max and sum of exp(s - max) over its visible
  // columns of the block; then combined into the row's log-sum-exp.
  std::vector<float> block_max(static_cast<size_t>(n_kv * max_blocks * rows), kNegInf);
  std::vector<float> block_sum(block_max.size(), 0.0f);
  for_each_block(0, false, [&](int64_t g, int64_t b, int64_t c0, int64_t width, const float* block, float*) {
    const GroupRows& gr = groups[static_cast<size_t>(g)];
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t n = std::min(width, gr.visible[static_cast<size_t>(r)] - c0);
      if (n <= 0) continue;
      const float* row = block + r * width;
      const float max = max_f32(row, n);
      const size_t at = static_cast<size_t>((g * max_blocks + b) * rows + r);
      block_max[at] = max;
      block_sum[at] = exp_shift_to_f32(row, max, n, nullptr);
    }
  });
  for (int64_t g = 0; g < n_kv; ++g) {
    GroupRows& gr = groups[static_cast<size_t>(g)];
    for (int64_t r = 0; r < rows; ++r) {
      float max = kNegInf;
      for (int64_t b = 0; b < max_blocks; ++b) max = std::max(max, block_max[static_cast<size_t>((g * max_blocks + b) * rows + r)]);
      if (max == kNegInf) continue;
      double sum = 0;
      for (int64_t b = 0; b < max_blocks; ++b) {
        const size_t at = static_cast<size_t>((g * max_blocks + b) * rows + r);
        if (block_sum[at] > 0) sum += block_sum[at] * std::exp(double(block_max[at]) - max);
      }
      gr.lse[static_cast<size_t>(r)] = max + static_cast<float>(std::log(sum));
    }
  }

  // Pass 2: probabilities per column block, reduced over rows then over the group.
  for_each_block((group + 2) * kColumnBlock, true, [&](int64_t g, int64_t, int64_t c0, int64_t width,
                                                       const float* block, float* head_acc) {
    const GroupRows& gr = groups[static_cast<size_t>(g)];
    float* probs = head_acc + group * kColumnBlock;  // one row's probabilities
    float* reduced = probs + kColumnBlock;           // the group's reduction
    std::fill(head_acc, head_acc + group * width, 0.0f);
    for (int64_t a = 0; a < group; ++a) {
      float* acc = head_acc + a * width;
      for (int64_t i = 0; i < q.m; ++i) {
        const int64_t r = a * q.m + i;
        const int64_t n = std::clamp<int64_t>(gr.visible[static_cast<size_t>(r)] - c0, 0, width);
        if (n == 0) continue;
        exp_shift_to_f32(block + r * width, gr.lse[static_cast<size_t>(r)], n, probs);
        if (row_reduction == RowReduction::kMax) {
          for (int64_t c = 0; c < n; ++c) acc[c] = std::max(acc[c], probs[c]);
        } else {
          axpy_f32(q.weights != nullptr ? q.weights[i] : 1.0f, probs, acc, n);
        }
      }
    }
    reduce_group(head_acc, width, group, width, q.head_weights != nullptr ? q.head_weights + g * group : nullptr,
                 group_reduction, row_reduction, reduced, out[static_cast<size_t>(g)].data() + c0);
  });
}

}  // namespace deferkv
