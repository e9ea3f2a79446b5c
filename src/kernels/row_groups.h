#pragma once
// Weights rearranged at load in groups of eight rows, for decode (row_groups.cpp,
// matvec_row_groups.cpp). A GGUF row keeps a block's values together; a decode step's
// matvec then ends every row with a horizontal sum and decodes each row's scales alone.
// In a row group the same four weight bytes of eight rows lie side by side, so one 32-byte
// load feeds eight rows, one broadcast of four activation bytes serves all of them, each
// vector lane is one row's dot product to its end (no horizontal sum), and a sub-block's
// scales of the eight rows are one vector. On Zen 4 this is what llama.cpp's repacked Q4_0
// and Q4_K decode gains over a row at a time (bench/README.md, "Row groups").
//
// The activation takes the int8 form (packed_activation.h): blocks of 32 for Q4_0, whose
// unsigned nibbles then take 8 * each block's sum back off; of 256 for Q4_K.
//
// Every block's sum is exact in int32 and scaled in float32 as row_groups.cpp's portable
// matvec does it, lane for lane, so every target gives the same bits.
#include <cstddef>
#include <cstdint>
#include <string>

#include "tensor/dtype.h"

namespace deferkv {

inline constexpr int64_t kGroupRows = 8;

// One block of a group of eight rows (rows r < 8), for block b of a row's nb; the groups of
// a matrix lie one after the other, each its nb blocks in order.
// Q4_0: the eight rows' 8 * 18 bytes of a 32-value block. The low nibbles of qs[g][r] are
// values 4g .. 4g + 3 of row r, the high ones values 16 + 4g .. 16 + 4g + 3.
struct GroupBlockQ4_0 {
  uint16_t d[8];         // fp16, per row
  uint8_t qs[4][8][4];   // [g][r]: bytes 4g .. 4g + 3 of row r's qs
};
// Q4_K: a 256-value block, its six-bit scales and mins unpacked to bytes (1184 bytes for the
// eight rows' 1152). The low nibbles of qs[c][g][r] are values 4g .. 4g + 3 of row r's
// sub-block 2c, the high ones the same values of sub-block 2c + 1.
struct GroupBlockQ4_K {
  uint16_t d[8];             // fp16, per row
  uint16_t dmin[8];          // fp16, per row
  uint8_t scales[8][8];      // [j][r]: sub-block j's scale
  uint8_t mins[4][8][2];     // [p][r]: the mins of sub-blocks 2p and 2p + 1
  uint8_t qs[4][8][8][4];    // [c][g][r]: bytes 32c + 4g .. + 3 of row r's qs
};
static_assert(sizeof(GroupBlockQ4_0) == 144);
static_assert(sizeof(GroupBlockQ4_K) == 1184);

// How weights are laid out for the kernels: as the GGUF has them (row after row), or in
// row groups (above). DEFERKV_WEIGHT_LAYOUT=gguf|row-groups in the environment picks it
// for the types that have row groups, read on first use (docs/cli.md), so that the two
// can be timed side by side; the default is row groups where the CPU's kernels run them
// in SIMD (x86 with AVX2), GGUF rows elsewhere.
enum class WeightLayout { kGgufRows, kRowGroups };
inline constexpr const char* kWeightLayoutVariable = "DEFERKV_WEIGHT_LAYOUT";
// "gguf" or "row-groups" (any case); error naming the known values otherwise.
WeightLayout parse_weight_layout(const std::string& name);
// The layout matrices of the types with row groups get now: the setting, or by default
// row groups where matvec_row_groups runs SIMD code (row_groups_in_simd), else GGUF rows.
WeightLayout weight_layout();
// Overrides the setting for the whole process (tests), before any model is loaded.
void set_weight_layout(WeightLayout layout);

// Whether a matrix of `rows` rows of `type` is grouped now: a type with row groups, rows a
// multiple of kGroupRows, and the setting (or the default) says so.
bool groups_rows(DType type, int64_t rows);
// Whether the type has a row-group layout at all (Q4_0, Q4_K).
bool has_row_groups(DType type);

// Bytes of one group of eight rows of n values.
size_t row_group_bytes(DType type, int64_t n);
// Rearranges `rows` GGUF rows (row_stride bytes apart; rows a multiple of 8) into
// rows / 8 groups at `groups`.
void group_rows(DType type, const void* rows, size_t row_stride, int64_t n, int64_t count, void* groups);
// Writes rows [first, first + count) of grouped weights back as GGUF rows, row_stride
// bytes apart (prefill's decoders and dequantize_row read those).
void ungroup_rows(DType type, const void* groups, int64_t n, int64_t first, int64_t count, void* rows,
                  size_t row_stride);

// The activation for grouped weights, as pack_activation (matvec.h) for GGUF rows.
size_t row_groups_activation_bytes(DType type, int64_t n);
// row_groups_activation_bytes rounded up to 64 (the distance between packed activations).
size_t row_groups_activation_stride(DType type, int64_t n);
void pack_row_groups_activation(DType type, const float* x, int64_t n, void* packed);

// y[i * ldy + r] = dot(row r, x_i) for i < m, r < rows (a multiple of 8) of the groups
// starting at `groups`; m packed activations packed_stride bytes apart. Every y row is
// bit for bit what m = 1 gives for its x_i alone. Single-threaded: split rows across
// threads at multiples of 8.
void matvec_row_groups(DType type, const void* groups, int64_t n, const void* packed, size_t packed_stride,
                       int64_t m, float* y, int64_t ldy, int64_t rows);
// The same, by the portable scalar code (the reference the SIMD kernels match bit for bit).
void matvec_row_groups_portable(DType type, const void* groups, int64_t n, const void* packed,
                                size_t packed_stride, int64_t m, float* y, int64_t ldy, int64_t rows);
// Whether matvec_row_groups runs SIMD code for the type on this CPU now (else the portable).
bool row_groups_in_simd(DType type);

}  // namespace deferkv
