// int16_rows.h: the layout of decoded rows, and dispatch to each type's decoder.
#include "kernels/int16_rows.h"

#include "deferkv/error.h"
#include "kernels/quant.h"
#include "kernels/quant_blocks.h"

namespace deferkv {
namespace {

size_t round_up(size_t bytes) { return (bytes + 63) / 64 * 64; }

bool has_mins(DType weight_type) { return weight_type == DType::Q4_K || weight_type == DType::Q5_K; }

}  // namespace

ScalesK4 Int16Rows::set_k4_scales(int64_t at, uint16_t d, uint16_t dmin, const uint8_t* scale_bytes) const {
  const ScalesK4 s = unpack_scales_k4(scale_bytes);
  scale[at] = fp16_to_fp32(d);
  min_scale[at] = fp16_to_fp32(dmin);
  for (int j = 0; j < 8; ++j) mins[at * 8 + j] = s.m[j];
  return s;
}

bool has_int16_rows(DType weight_type) {
  switch (weight_type) {
    case DType::Q8_0:
    case DType::Q4_0:
    case DType::Q4_K:
    case DType::Q5_K:
    case DType::Q6_K: return true;
    case DType::F32:
    case DType::F16:
    case DType::BF16: return false;
  }
  return false;
}

size_t int16_rows_bytes(DType weight_type, int64_t count, int64_t n, int64_t group_rows) {
  const auto values = static_cast<size_t>((count + group_rows - 1) / group_rows * group_rows * n);
  const auto blocks = static_cast<size_t>(count * (n / dtype_block_elems(weight_type)));
  size_t bytes = round_up(values * sizeof(int16_t)) + round_up(blocks * sizeof(float));
  if (has_mins(weight_type)) bytes += round_up(blocks * 8 * sizeof(int16_t)) + round_up(blocks * sizeof(float));
  return bytes;
}

Int16Rows int16_rows_in(void* scratch, DType weight_type, int64_t count, int64_t n, int64_t group_rows) {
  const int64_t block = dtype_block_elems(weight_type);
  const auto values = static_cast<size_t>((count + group_rows - 1) / group_rows * group_rows * n);
  const auto blocks = static_cast<size_t>(count * (n / block));
  auto* at = static_cast<unsigned char*>(scratch);
  const auto take = [&at](size_t bytes) {
    unsigned char* start = at;
    at += round_up(bytes);
    return start;
  };
  Int16Rows rows;
  rows.n = n;
  rows.block = static_cast<int>(block);
  rows.group_rows = group_rows;
  rows.q = reinterpret_cast<int16_t*>(take(values * sizeof(int16_t)));
  rows.scale = reinterpret_cast<float*>(take(blocks * sizeof(float)));
  if (has_mins(weight_type)) {
    rows.mins = reinterpret_cast<int16_t*>(take(blocks * 8 * sizeof(int16_t)));
    rows.min_scale = reinterpret_cast<float*>(take(blocks * sizeof(float)));
  }
  return rows;
}

void decode_int16_rows(DType weight_type, const void* rows, size_t row_stride, int64_t count, const Int16Rows& out) {
  switch (weight_type) {
    case DType::Q8_0: decode_int16_rows_q8_0(rows, row_stride, count, out); return;
    case DType::Q4_0: decode_int16_rows_q4_0(rows, row_stride, count, out); return;
    case DType::Q4_K: decode_int16_rows_q4_k(rows, row_stride, count, out); return;
    case DType::Q5_K: decode_int16_rows_q5_k(rows, row_stride, count, out); return;
    case DType::Q6_K: decode_int16_rows_q6_k(rows, row_stride, count, out); return;
    case DType::F32:
    case DType::F16:
    case DType::BF16: break;
  }
  fail("gemm_int16: no integer rows for weight type {}", dtype_name(weight_type));
}

}  // namespace deferkv
