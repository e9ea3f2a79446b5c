#include "kernels/attention.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "base/thread_pool.h"
#include "kernels/vec.h"

namespace deferkv {
namespace {

// Query rows per block in prefill: enough to make the two GEMMs efficient, small
// enough that the score block (rows x cache length) stays modest.
constexpr int64_t kQueryBlock = 32;

// One query row against its visible prefix of one KV head, without BLAS (decode).
void attend_one(const float* q, const KvHeadView& kv, int64_t visible, int64_t head_dim,
                float scale, float* scores, float* out) {
  for (int64_t j = 0; j < visible; ++j) {
    scores[j] = dot_f32(q, kv.keys + j * head_dim, head_dim) * scale;
  }
  softmax_f32(scores, visible);
  std::fill(out, out + head_dim, 0.0f);
  for (int64_t j = 0; j < visible; ++j) axpy_f32(scores[j], kv.values + j * head_dim, out, head_dim);
}

// A block of query rows [r0, r1) of one head, through two GEMMs.
void attend_block(const float* queries, int64_t q_stride, int64_t r0, int64_t r1, int64_t n,
                  const KvHeadView& kv, int64_t head_dim, float scale, float* scores,
                  float* out, int64_t out_stride) {
  const int64_t rows = r1 - r0;
  const int64_t past = kv.length - n;
  const int64_t width = past + r1;  // entries the last row of the block sees
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(rows),
              static_cast<int>(width), static_cast<int>(head_dim), scale, queries + r0 * q_stride,
              static_cast<int>(q_stride), kv.keys, static_cast<int>(head_dim), 0.0f, scores,
              static_cast<int>(width));
  for (int64_t r = 0; r < rows; ++r) {
    float* row = scores + r * width;
    const int64_t visible = past + r0 + r + 1;
    softmax_f32(row, visible);
    std::fill(row + visible, row + width, 0.0f);
  }
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(rows),
              static_cast<int>(head_dim), static_cast<int>(width), 1.0f, scores,
              static_cast<int>(width), kv.values, static_cast<int>(head_dim), 0.0f,
              out + r0 * out_stride, static_cast<int>(out_stride));
}

}  // namespace

void AttentionScratch::reserve(int n_threads, int64_t capacity) {
  scores.resize(static_cast<size_t>(n_threads));
  for (auto& buffer : scores) buffer.resize(static_cast<size_t>(kQueryBlock * capacity));
}

void attention(const float* queries, int64_t n, const AttentionShape& shape,
               const std::vector<KvHeadView>& kv_heads, float* out, AttentionScratch& scratch,
               ThreadPool& pool) {
  const int64_t stride = shape.n_head * shape.head_dim;
  const int64_t group = shape.n_head / shape.n_head_kv;
  const int64_t blocks = (n + kQueryBlock - 1) / kQueryBlock;
  // Work items are (head, query block); tiny ones are grouped so that waking a worker
  // is repaid (as in the projections).
  const int64_t item_work = std::min(n, kQueryBlock) * kv_heads[0].length * shape.head_dim;
  const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 16) / std::max<int64_t>(1, item_work));
  pool.parallel_for(shape.n_head * blocks, grain, [&](int64_t begin, int64_t end, int thread) {
    float* scores = scratch.scores[static_cast<size_t>(thread)].data();
    for (int64_t item = begin; item < end; ++item) {
      const int64_t h = item / blocks;
      const int64_t block = item % blocks;
      const KvHeadView& kv = kv_heads[static_cast<size_t>(h / group)];
      const float* q = queries + h * shape.head_dim;
      float* o = out + h * shape.head_dim;
      if (n == 1) {
        attend_one(q, kv, kv.length, shape.head_dim, shape.scale, scores, o);
      } else {
        const int64_t r0 = block * kQueryBlock;
        const int64_t r1 = std::min(n, r0 + kQueryBlock);
        attend_block(q, stride, r0, r1, n, kv, shape.head_dim, shape.scale, scores, o, stride);
      }
    }
  });
}

}  // namespace deferkv
