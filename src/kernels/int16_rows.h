#pragma once
// Quantised weight rows decoded to integers for gemm_int16 (gemm_int16.h): a tile of
// `count` rows of n values, value k of row r being
//   at(r, k)[0] * scale[r * nb + b]  -  min_scale[r * nb + b] * mins[(r * nb + b) * 8 + s]
// with b = k / block the value's block (nb = n / block blocks a row) and s = (k % 256) / 32
// its sub-block; the min term only for the types that have one (Q4_K, Q5_K). The integer
// folds in what is integer per sub-block (the six-bit scale of a K-quant), so one int32
// sum per block and row, times one float, gives the block's share of a dot product. Each
// type's decoder lives in its own file (int16_rows_<type>.cpp).
//
// The values lie as gemm_int16's micro-kernel reads them: rows in groups of group_rows,
// and within a group each run of kRunValues values of every row side by side, so that one
// pointer and fixed offsets reach the same pair of values of every row of a group.
#include <cstddef>
#include <cstdint>

#include "kernels/quant_blocks.h"
#include "tensor/dtype.h"

namespace deferkv {

struct Int16Rows {
  static constexpr int64_t kRunValues = 32;

  int64_t n = 0;
  int block = 0;               // values per float scale: 256 (K-quants) or 32
  int64_t group_rows = 1;      // rows side by side (gemm_int16's micro-kernel rows)
  int16_t* q = nullptr;        // [count rounded up to group_rows][n], laid out as above
  float* scale = nullptr;      // [count][nb]
  int16_t* mins = nullptr;     // [count][nb][8], nullptr for types without mins
  float* min_scale = nullptr;  // [count][nb]

  // Sets a Q4_K/Q5_K block's scale, min_scale and mins (at: row * nb + block) from its
  // fp16 d and dmin and its 12 scale bytes; returns the bytes decoded.
  ScalesK4 set_k4_scales(int64_t at, uint16_t d, uint16_t dmin, const uint8_t* scale_bytes) const;

  // Where values k .. k + 15 of row r lie (k a multiple of 16; also k .. k + 31 when k is
  // a multiple of 32).
  int16_t* at(int64_t r, int64_t k) const {
    const int64_t group = r / group_rows, j = r % group_rows;
    return q + (group * n + k / kRunValues * kRunValues) * group_rows + j * kRunValues + k % kRunValues;
  }
};

// The layout of `count` decoded rows in groups of group_rows in `scratch` (64-byte aligned
// arrays), and its size.
Int16Rows int16_rows_in(void* scratch, DType weight_type, int64_t count, int64_t n, int64_t group_rows);
size_t int16_rows_bytes(DType weight_type, int64_t count, int64_t n, int64_t group_rows);

// Whether a decoder exists for the type.
bool has_int16_rows(DType weight_type);
// Decodes `count` rows, row_stride bytes apart, into `out` (from int16_rows_in).
void decode_int16_rows(DType weight_type, const void* rows, size_t row_stride, int64_t count, const Int16Rows& out);

// One decoder per type, each in int16_rows_<type>.cpp.
void decode_int16_rows_q8_0(const void* rows, size_t row_stride, int64_t count, const Int16Rows& out);
void decode_int16_rows_q4_0(const void* rows, size_t row_stride, int64_t count, const Int16Rows& out);
void decode_int16_rows_q4_k(const void* rows, size_t row_stride, int64_t count, const Int16Rows& out);
void decode_int16_rows_q5_k(const void* rows, size_t row_stride, int64_t count, const Int16Rows& out);
void decode_int16_rows_q6_k(const void* rows, size_t row_stride, int64_t count, const Int16Rows& out);

}  // namespace deferkv
