#pragma once
// One KV head's stored keys or values, read in place in their storage type: f32, f16,
// bf16, q8_0 or q4_0, one row of head_dim values per cache entry (quantised blocks of 32
// run along the row, so every entry stays movable on its own).
//
// A row may encode its entry x rather than hold it (KvRowCoding): the KV cache stores its
// quantised rows as round(H (x - shift)), H the orthonormal Walsh-Hadamard transform over
// the row (hadamard.h), which spreads a block's few large values over all of the row so
// that its scale is not set by one of them. Every reader below returns the entries themselves,
// H row + shift; the products get there without decoding each row (a score against
// H row + shift is (H q) . row + q . shift).
//
// Precision: the stored rows are what every path reads. Attention and the attention
// observation that presses score with dequantise tiles of rows to float32 and do their
// products in float32 (f32 rows are read in place); for at most kFusedKvRows query rows
// (a decode step's group of query heads) fp16 and bf16 rows are converted in registers
// instead (kv_rows_half.cpp), still with float32 products and sums. Presses that read
// keys or values see the same float32 dequantised rows through KvRowReader, never the unrounded
// projections: KNorm and Expected Attention score the stored keys; Expected Attention's
// value norms, behavior_preserving's deletion model and CompressKV's calibration read
// the stored values.
#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "tensor/dtype.h"

namespace deferkv {

// How a head's rows encode its entries: row = type's rounding of (rotated ? H (x - shift) :
// x - shift), a missing shift being 0, so entry = (rotated ? H row : row) + shift, H of
// order hadamard_order(head_dim).
struct KvRowCoding {
  bool rotated = false;
  const float* shift = nullptr;  // head_dim floats, or nullptr for none
  bool any() const { return rotated || shift != nullptr; }
};

// Encodes one entry's head_dim values x as a row of `type` into `row`; scratch holds
// head_dim floats when the coding does anything (unused otherwise).
void encode_kv_row(DType type, const KvRowCoding& coding, const float* x, int64_t head_dim, float* scratch,
                   uint8_t* row);

// The row that holds entry j when the rows at `holes` (ascending) hold no entry.
int64_t row_of_entry(std::span<const int32_t> holes, int64_t j);

// Entry j is row j of `data`, unless the head has holes: rows an eviction erased but left
// in place until enough of them are worth one compaction (KvCache::erase_lazily). Then
// entry j is the j-th row that is not a hole. Every reader below walks the runs of rows
// between the holes, so a reader sees the entries in order whatever the layout, and the
// products give the same floats as over the compacted rows (each score is one row's dot
// product; each weighted sum adds its rows in entry order), except f32 values: with
// holes they are summed a tile at a time, not by one GEMM over the rows in place.
struct KvRows {
  const uint8_t* data = nullptr;
  DType type = DType::F32;
  int64_t head_dim = 0;
  std::span<const int32_t> holes = {};  // rows of `data` that are not entries, ascending
  KvRowCoding coding = {};

  int64_t row_bytes() const { return dtype_row_bytes(type, head_dim); }
  // The row of `data` that holds entry j.
  int64_t physical_row(int64_t j) const { return row_of_entry(holes, j); }
  const uint8_t* row(int64_t j) const { return data + physical_row(j) * row_bytes(); }
  // The entries themselves when stored as f32 without holes or coding (kernels then read
  // them in place), else nullptr.
  const float* f32() const {
    return type == DType::F32 && holes.empty() && !coding.any() ? reinterpret_cast<const float*>(data) : nullptr;
  }
  // Entries [begin, begin + count) as float32 into out ([count x head_dim]), decoded.
  void to_f32(int64_t begin, int64_t count, float* out) const;
  // The same rows as float32 but not decoded (the stored row values).
  void stored_to_f32(int64_t begin, int64_t count, float* out) const;
  // Calls fn(first entry, its row, entries) for each run of consecutive rows that holds
  // entries [begin, begin + count), in order.
  template <class Fn>
  void for_each_run(int64_t begin, int64_t count, const Fn& fn) const {
    int64_t row = physical_row(begin);
    auto hole = static_cast<size_t>(row - begin);  // the holes before `row`
    while (count > 0) {
      const int64_t next_hole = hole < holes.size() ? holes[hole] : row + count;
      const int64_t n = std::min(count, next_hole - row);
      fn(begin, data + row * row_bytes(), n);
      begin += n;
      count -= n;
      row += n;
      while (hole < holes.size() && holes[hole] == row) ++hole, ++row;
    }
  }
};

// Rows of head_dim float32 values at `data`, as an f32 cache stores them.
inline KvRows f32_rows(const float* data, int64_t head_dim) {
  return {reinterpret_cast<const uint8_t*>(data), DType::F32, head_dim};
}

// Floats of scratch the two products below need (kKvTileFloats / head_dim rows a tile).
inline constexpr int64_t kKvTileFloats = 16384;
// Query rows up to which fp16 / bf16 rows skip the tile (kv_rows_half.cpp).
inline constexpr int64_t kFusedKvRows = 8;

// scores[r * ld_scores + c] = dot(query row r, key c0 + c) for r < rows, c < width. f32
// keys are read in place by one GEMM; other types a tile of rows at a time, dequantised
// into `tile` (kKvTileFloats floats), so no float copy of the whole head is made. With
// rotated keys the tile also holds the rotated queries.
void kv_key_scores(const float* queries, int64_t ld_queries, int64_t rows, const KvRows& keys, int64_t c0,
                   int64_t width, float* scores, int64_t ld_scores, float* tile);
// out[r * ld_out + i] = sum over c < width of probs[r * ld_probs + c] * value c [i]; width >= 1.
void kv_weighted_values(const float* probs, int64_t ld_probs, int64_t rows, const KvRows& values, int64_t width,
                        float* out, int64_t ld_out, float* tile);

// The two products above for 1..kFusedKvRows rows over fp16 (bf16 = false) or bf16 rows
// stored contiguously, each row converted in registers as it is read (kv_rows_half.cpp).
void half_kv_key_scores(const float* queries, int64_t ld_queries, int64_t rows, const uint16_t* keys, bool bf16,
                        int64_t head_dim, int64_t width, float* scores, int64_t ld_scores);
// The weighted values are added to out when accumulate (continuing its sums in order).
void half_kv_weighted_values(const float* probs, int64_t ld_probs, int64_t rows, const uint16_t* values, bool bf16,
                             int64_t head_dim, int64_t width, float* out, int64_t ld_out, bool accumulate = false);

// Single rows as float32: f32 rows in place, others dequantised into the reader's
// own one-row scratch (valid until the next call). Use one reader per row held at once.
class KvRowReader {
 public:
  explicit KvRowReader(const KvRows& rows) : rows_(rows) {}
  const float* operator()(int64_t j);

 private:
  KvRows rows_;
  std::vector<float> scratch_;
};

}  // namespace deferkv
