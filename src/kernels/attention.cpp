#include "kernels/attention.h"

#include <algorithm>

#include "base/thread_pool.h"
#include "kernels/vec.h"

namespace deferkv {
namespace {

// Query rows per block in prefill: enough to make the two GEMMs efficient, small
// enough that the score block (rows x cache length) stays modest.
constexpr int64_t kQueryBlock = 32;

// Items per chunk so that waking a worker is repaid: about 64K multiply-adds a chunk.
int64_t grain_for(int64_t item_work) {
  return std::max<int64_t>(1, (int64_t{1} << 16) / std::max<int64_t>(1, item_work));
}

// P = softmax(scale * S) over the first `visible` entries of a row; the rest set to 0.
void softmax_row(float* row, int64_t visible, int64_t width, float scale) {
  scale_f32(scale, row, visible);
  softmax_f32(row, visible);
  std::fill(row + visible, row + width, 0.0f);
}

// Decode: the query heads [h0, h0 + heads) that share one KV head, all at the newest
// position, as one block, so each key and value is read once for the whole group. The
// probabilities are computed in `probs` ([heads x length]: the thread's scratch, or the
// caller's buffer when it keeps them).
void attend_group(const float* queries, int64_t heads, const KvHeadView& kv, int64_t head_dim,
                  float scale, float* probs, float* tile, float* out) {
  attention_probabilities(queries, heads, kv, head_dim, scale, kv.length, probs, tile);
  kv_weighted_values(probs, kv.length, heads, kv.values, kv.length, out, head_dim, tile);
}

// Prefill: a block of query rows [r0, r1) of one head, causal over its batch.
void attend_block(const float* queries, int64_t q_stride, int64_t r0, int64_t r1, int64_t n,
                  const KvHeadView& kv, int64_t head_dim, float scale, float* scores, float* tile,
                  float* out, int64_t out_stride) {
  const int64_t rows = r1 - r0;
  const int64_t past = kv.length - n;
  const int64_t width = past + r1;  // entries the last row of the block sees
  kv_key_scores(queries + r0 * q_stride, q_stride, rows, kv.keys, 0, width, scores, width, tile);
  for (int64_t r = 0; r < rows; ++r) softmax_row(scores + r * width, past + r0 + r + 1, width, scale);
  kv_weighted_values(scores, width, rows, kv.values, width, out + r0 * out_stride, out_stride, tile);
}

}  // namespace

void attention_probabilities(const float* queries, int64_t heads, const KvHeadView& kv, int64_t head_dim,
                             float scale, int64_t visible, float* probs, float* tile) {
  const int64_t len = kv.length;
  kv_key_scores(queries, head_dim, heads, kv.keys, 0, len, probs, len, tile);
  for (int64_t r = 0; r < heads; ++r) softmax_row(probs + r * len, visible, len, scale);
}

void AttentionScratch::reserve(int n_threads, int64_t capacity) {
  scores.resize(static_cast<size_t>(n_threads));
  for (auto& buffer : scores) buffer.resize(static_cast<size_t>(kQueryBlock * capacity));
  tiles.resize(static_cast<size_t>(n_threads));
  for (auto& buffer : tiles) buffer.resize(static_cast<size_t>(kKvTileFloats));
}

void attention(const float* queries, int64_t n, const AttentionShape& shape,
               const std::vector<KvHeadView>& kv_heads, float* out, AttentionScratch& scratch,
               ThreadPool& pool) {
  const int64_t stride = shape.n_head * shape.head_dim;
  const int64_t group = shape.n_head / shape.n_head_kv;
  if (n == 1) {
    // One item per (KV head, chunk of its query heads); a chunk fits the score scratch.
    const int64_t chunks = (group + kQueryBlock - 1) / kQueryBlock;
    const int64_t item_work = std::min(group, kQueryBlock) * kv_heads[0].length * shape.head_dim;
    if (scratch.keep_decode_probabilities) {
      scratch.decode_probabilities.resize(static_cast<size_t>(shape.n_head_kv));
      for (int64_t g = 0; g < shape.n_head_kv; ++g) {
        scratch.decode_probabilities[static_cast<size_t>(g)].resize(
            static_cast<size_t>(group * kv_heads[static_cast<size_t>(g)].length));
      }
    }
    pool.parallel_for(shape.n_head_kv * chunks, grain_for(item_work), [&](int64_t begin, int64_t end, int thread) {
      float* scores = scratch.scores[static_cast<size_t>(thread)].data();
      float* tile = scratch.tiles[static_cast<size_t>(thread)].data();
      for (int64_t item = begin; item < end; ++item) {
        const int64_t g = item / chunks;
        const int64_t h0 = g * group + item % chunks * kQueryBlock;
        const int64_t heads = std::min(kQueryBlock, (g + 1) * group - h0);
        const KvHeadView& kv = kv_heads[static_cast<size_t>(g)];
        float* probs = scratch.keep_decode_probabilities
                           ? scratch.decode_probabilities[static_cast<size_t>(g)].data() + (h0 - g * group) * kv.length
                           : scores;
        attend_group(queries + h0 * shape.head_dim, heads, kv, shape.head_dim, shape.scale, probs, tile,
                     out + h0 * shape.head_dim);
      }
    });
    return;
  }
  const int64_t blocks = (n + kQueryBlock - 1) / kQueryBlock;
  const int64_t item_work = std::min(n, kQueryBlock) * kv_heads[0].length * shape.head_dim;
  pool.parallel_for(shape.n_head * blocks, grain_for(item_work), [&](int64_t begin, int64_t end, int thread) {
    float* scores = scratch.scores[static_cast<size_t>(thread)].data();
    float* tile = scratch.tiles[static_cast<size_t>(thread)].data();
    for (int64_t item = begin; item < end; ++item) {
      const int64_t h = item / blocks;
      const int64_t r0 = item % blocks * kQueryBlock;
      const int64_t r1 = std::min(n, r0 + kQueryBlock);
      attend_block(queries + h * shape.head_dim, stride, r0, r1, n, kv_heads[static_cast<size_t>(h / group)],
                   shape.head_dim, shape.scale, scores, tile, out + h * shape.head_dim, stride);
    }
  });
}

}  // namespace deferkv
