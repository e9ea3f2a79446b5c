#include "kernels/kv_rows.h"

#include <cblas.h>

#include <algorithm>
#include <numeric>

#include "kernels/gemm.h"
#include "kernels/hadamard.h"
#include "kernels/quant.h"
#include "kernels/vec.h"

namespace deferkv {
namespace {

int64_t tile_rows(int64_t head_dim) { return std::max<int64_t>(1, kKvTileFloats / head_dim); }

// out = A B over k shared entries (rows x k probabilities, k x head_dim values), added to
// out when accumulate.
void sgemm_probs_values(const float* probs, int64_t ld_probs, int64_t rows, const float* values, int64_t k,
                        int64_t head_dim, bool accumulate, float* out, int64_t ld_out) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(rows), static_cast<int>(head_dim),
              static_cast<int>(k), 1.0f, probs, static_cast<int>(ld_probs), values, static_cast<int>(head_dim),
              accumulate ? 1.0f : 0.0f, out, static_cast<int>(ld_out));
}

// fp16 / bf16 rows for few query rows: converted in registers (kv_rows_half.cpp).
bool fused(const KvRows& rows, int64_t query_rows) {
  return (rows.type == DType::F16 || rows.type == DType::BF16) && query_rows <= kFusedKvRows && !rows.coding.any();
}

// Scores against coded keys: with entry = H row + shift, q . entry = (H q) . row + q . shift,
// so each pass rotates a group of query rows once into the front of `tile`, dequantises
// tiles of stored rows behind them and adds q . shift to each score row.
void coded_key_scores(const float* queries, int64_t ld_queries, int64_t rows, const KvRows& keys, int64_t c0,
                      int64_t width, float* scores, int64_t ld_scores, float* tile) {
  const int64_t d = keys.head_dim;
  const int64_t pass = keys.coding.rotated ? std::min(rows, std::max<int64_t>(1, kKvTileFloats / 2 / d)) : rows;
  const int64_t step = tile_rows(d) - (keys.coding.rotated ? pass : 0);
  float* key_tile = keys.coding.rotated ? tile + pass * d : tile;
  for (int64_t r0 = 0; r0 < rows; r0 += pass) {
    const int64_t n_rows = std::min(pass, rows - r0);
    const float* q = queries + r0 * ld_queries;
    int64_t ld_q = ld_queries;
    if (keys.coding.rotated) {
      for (int64_t r = 0; r < n_rows; ++r) std::copy_n(queries + (r0 + r) * ld_queries, d, tile + r * d);
      hadamard_blocks(tile, n_rows * d, hadamard_order(d));
      q = tile;
      ld_q = d;
    }
    float* out = scores + r0 * ld_scores;
    for (int64_t t = 0; t < width; t += step) {
      const int64_t n = std::min(step, width - t);
      keys.stored_to_f32(c0 + t, n, key_tile);
      gemm_f32_nt(q, ld_q, n_rows, key_tile, d, n, d, out + t, ld_scores);
    }
    if (keys.coding.shift == nullptr) continue;
    for (int64_t r = 0; r < n_rows; ++r) {
      const float offset = dot_f32(queries + (r0 + r) * ld_queries, keys.coding.shift, d);
      float* row = out + r * ld_scores;
      for (int64_t c = 0; c < width; ++c) row[c] += offset;
    }
  }
}

// Decodes rows x head_dim floats of sums of stored rows in place: sum_c p_c entry_c =
// H (sum_c p_c row_c) + (sum_c p_c) shift.
void decode_weighted_sums(const KvRows& values, const float* probs, int64_t ld_probs, int64_t rows, int64_t width,
                          float* out, int64_t ld_out) {
  for (int64_t r = 0; r < rows; ++r) {
    float* sums = out + r * ld_out;
    if (values.coding.rotated) hadamard_blocks(sums, values.head_dim, hadamard_order(values.head_dim));
    if (values.coding.shift == nullptr) continue;
    const float* p = probs + r * ld_probs;
    axpy_f32(std::accumulate(p, p + width, 0.0f), values.coding.shift, sums, values.head_dim);
  }
}

const uint16_t* as_halves(const uint8_t* row) { return reinterpret_cast<const uint16_t*>(row); }

}  // namespace

int64_t row_of_entry(std::span<const int32_t> holes, int64_t j) {
  // Hole k has holes[k] - k entries before it: entry j lies past the holes with
  // holes[k] - k <= j.
  size_t lo = 0, hi = holes.size();
  while (lo < hi) {
    const size_t mid = (lo + hi) / 2;
    if (holes[mid] - static_cast<int64_t>(mid) <= j) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return j + static_cast<int64_t>(lo);
}

void kv_key_scores(const float* queries, int64_t ld_queries, int64_t rows, const KvRows& keys, int64_t c0,
                   int64_t width, float* scores, int64_t ld_scores, float* tile) {
  const int64_t d = keys.head_dim;
  if (keys.coding.any()) {
    coded_key_scores(queries, ld_queries, rows, keys, c0, width, scores, ld_scores, tile);
    return;
  }
  // Each score is one key's own dot product, so the runs between holes score alone.
  if (keys.type == DType::F32) {
    keys.for_each_run(c0, width, [&](int64_t first, const uint8_t* run, int64_t n) {
      gemm_f32_nt(queries, ld_queries, rows, reinterpret_cast<const float*>(run), d, n, d, scores + (first - c0),
                  ld_scores);
    });
    return;
  }
  if (fused(keys, rows)) {
    keys.for_each_run(c0, width, [&](int64_t first, const uint8_t* run, int64_t n) {
      half_kv_key_scores(queries, ld_queries, rows, as_halves(run), keys.type == DType::BF16, d, n,
                         scores + (first - c0), ld_scores);
    });
    return;
  }
  const int64_t step = tile_rows(d);
  for (int64_t t = 0; t < width; t += step) {
    const int64_t n = std::min(step, width - t);
    keys.to_f32(c0 + t, n, tile);
    gemm_f32_nt(queries, ld_queries, rows, tile, d, n, d, scores + t, ld_scores);
  }
}

void kv_weighted_values(const float* probs, int64_t ld_probs, int64_t rows, const KvRows& values, int64_t width,
                        float* out, int64_t ld_out, float* tile) {
  const int64_t d = values.head_dim;
  if (const float* f = values.f32()) {
    sgemm_probs_values(probs, ld_probs, rows, f, width, d, false, out, ld_out);
    return;
  }
  if (fused(values, rows)) {
    // Each run continues the sums where the one before stopped: the same additions, in
    // the same order, as over contiguous rows.
    values.for_each_run(0, width, [&](int64_t first, const uint8_t* run, int64_t n) {
      half_kv_weighted_values(probs + first, ld_probs, rows, as_halves(run), values.type == DType::BF16, d, n, out,
                              ld_out, first > 0);
    });
    return;
  }
  const int64_t step = tile_rows(d);
  for (int64_t t = 0; t < width; t += step) {
    const int64_t n = std::min(step, width - t);
    values.stored_to_f32(t, n, tile);
    sgemm_probs_values(probs + t, ld_probs, rows, tile, n, d, t > 0, out, ld_out);
  }
  if (values.coding.any()) decode_weighted_sums(values, probs, ld_probs, rows, width, out, ld_out);
}

void encode_kv_row(DType type, const KvRowCoding& coding, const float* x, int64_t head_dim, float* scratch,
                   uint8_t* row) {
  if (!coding.any()) {
    quantize_row(type, x, row, head_dim);
    return;
  }
  for (int64_t i = 0; i < head_dim; ++i) scratch[i] = x[i] - (coding.shift != nullptr ? coding.shift[i] : 0.0f);
  if (coding.rotated) hadamard_blocks(scratch, head_dim, hadamard_order(head_dim));
  quantize_row(type, scratch, row, head_dim);
}

void KvRows::stored_to_f32(int64_t begin, int64_t count, float* out) const {
  // One call per run of rows: the block layouts run row after row without gaps.
  for_each_run(begin, count, [&](int64_t first, const uint8_t* run, int64_t n) {
    dequantize_row(type, run, out + (first - begin) * head_dim, n * head_dim);
  });
}

void KvRows::to_f32(int64_t begin, int64_t count, float* out) const {
  stored_to_f32(begin, count, out);
  if (coding.rotated) hadamard_blocks(out, count * head_dim, hadamard_order(head_dim));
  if (coding.shift == nullptr) return;
  for (int64_t j = 0; j < count; ++j) add_f32(coding.shift, out + j * head_dim, head_dim);
}

const float* KvRowReader::operator()(int64_t j) {
  if (rows_.type == DType::F32 && !rows_.coding.any()) return reinterpret_cast<const float*>(rows_.row(j));
  scratch_.resize(static_cast<size_t>(rows_.head_dim));
  rows_.to_f32(j, 1, scratch_.data());
  return scratch_.data();
}

}  // namespace deferkv
