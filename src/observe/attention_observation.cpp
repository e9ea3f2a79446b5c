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

// scores[r][c] = scale * q_r . k_{c0 + c} for the block's columns.
// Float32 products against the stored keys (dequantised into `tile` unless f32).
void score_block(const GroupRows& g, int64_t rows, const KvHeadView& kv, int64_t head_dim, float scale,
                 int64_t c0, int64_t width, float* scores, float* tile) {
  kv_key_scores(g.queries.data(), head_dim, rows, kv.keys, c0, width, scores, width, tile);
  scale_f32(scale, scores, rows * width);
}

}  // namespace

void observe_attention(const ObservedQueries& q, const AttentionShape& shape,
                       const std::vector<KvHeadView>& kv, RowReduction row_reduction,
                       GroupReduction group_reduction, std::vector<std::vector<float>>& out,
                       ThreadPool& pool) {
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
  const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 16) / std::max<int64_t>(1, rows * kColumnBlock * d));
  // Calls fn(g, b, c0, width, scores, extra) for every (KV head g, column block b) in
  // parallel: `scores` holds the block's scaled scores [rows x width], and `extra`
  // extra_floats more of the thread's scratch (after the keys' dequantisation tile).
  auto for_each_block = [&](int64_t extra_floats, const auto& fn) {
    pool.parallel_for(n_kv * max_blocks, grain, [&](int64_t begin, int64_t end, int) {
      float* scores = thread_scratch(rows * kColumnBlock + kKvTileFloats + extra_floats);
      float* tile = scores + rows * kColumnBlock;
      for (int64_t item = begin; item < end; ++item) {
        const int64_t g = item / max_blocks, b = item % max_blocks;
        const KvHeadView& head = kv[static_cast<size_t>(g)];
        const int64_t c0 = b * kColumnBlock;
        const int64_t width = std::min(kColumnBlock, head.length - c0);
        if (width <= 0) continue;
        score_block(groups[static_cast<size_t>(g)], rows, head, d, shape.scale, c0, width, scores, tile);
        fn(g, b, c0, width, scores, tile + kKvTileFloats);
      }
    });
  };

  // Pass 1: per (group, block) each row's max and sum of exp(s - max) over its visible
  // columns of the block; then combined into the row's log-sum-exp.
  std::vector<float> block_max(static_cast<size_t>(n_kv * max_blocks * rows), kNegInf);
  std::vector<float> block_sum(block_max.size(), 0.0f);
  for_each_block(0, [&](int64_t g, int64_t b, int64_t c0, int64_t width, float* scores, float*) {
    const GroupRows& gr = groups[static_cast<size_t>(g)];
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t n = std::min(width, gr.visible[static_cast<size_t>(r)] - c0);
      if (n <= 0) continue;
      float* row = scores + r * width;
      const float max = max_f32(row, n);
      const size_t at = static_cast<size_t>((g * max_blocks + b) * rows + r);
      block_max[at] = max;
      block_sum[at] = exp_shift_f32(row, max, n);
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
  for_each_block(group * kColumnBlock, [&](int64_t g, int64_t, int64_t c0, int64_t width, float* scores,
                                           float* head_acc) {
    const GroupRows& gr = groups[static_cast<size_t>(g)];
    std::fill(head_acc, head_acc + group * width, 0.0f);
    for (int64_t a = 0; a < group; ++a) {
      float* acc = head_acc + a * width;
      for (int64_t i = 0; i < q.m; ++i) {
        const int64_t r = a * q.m + i;
        const int64_t n = std::min(width, gr.visible[static_cast<size_t>(r)] - c0);
        if (n <= 0) continue;
        float* row = scores + r * width;
        exp_shift_f32(row, gr.lse[static_cast<size_t>(r)], n);
        if (row_reduction == RowReduction::kMax) {
          for (int64_t c = 0; c < n; ++c) acc[c] = std::max(acc[c], row[c]);
        } else {
          axpy_f32(q.weights != nullptr ? q.weights[i] : 1.0f, row, acc, n);
        }
      }
    }
    float* dst = out[static_cast<size_t>(g)].data() + c0;
    for (int64_t c = 0; c < width; ++c) {
      float v = 0.0f;  // probabilities are >= 0, so 0 also starts a max
      for (int64_t a = 0; a < group; ++a) {
        const float x = head_acc[a * width + c] * (q.head_weights != nullptr ? q.head_weights[g * group + a] : 1.0f);
        v = group_reduction == GroupReduction::kMax ? std::max(v, x) : v + x;
      }
      if (group_reduction == GroupReduction::kMean) v /= static_cast<float>(group);
      dst[c] = row_reduction == RowReduction::kMax ? std::max(dst[c], v) : dst[c] + v;
    }
  });
}

}  // namespace deferkv
