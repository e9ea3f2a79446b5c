// Row groups (row_groups.h): the setting, the layouts' writing and reading, and the
// portable matvec that the SIMD kernels (matvec_row_groups.cpp) match bit for bit.
#include "kernels/row_groups.h"

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "base/setting.h"
#include "deferkv/error.h"
#include "kernels/matvec_kernels.h"
#include "kernels/packed_activation.h"
#include "kernels/quant.h"
#include "kernels/quant_blocks.h"

namespace deferkv {

namespace {


// The setting: the environment's, or kDefault (weight_layout).
enum class Setting { kGgufRows, kRowGroups, kDefault };
std::atomic<Setting>& setting() {
  static std::atomic<Setting> value{[] {
    const char* v = std::getenv(kWeightLayoutVariable);
    if (v == nullptr || *v == '\0') return Setting::kDefault;
    return parse_weight_layout(v) == WeightLayout::kRowGroups ? Setting::kRowGroups : Setting::kGgufRows;
  }()};
  return value;
}

void check_type(DType type) {
  if (!has_row_groups(type)) fail("internal: {} weights have no row-group layout", dtype_name(type));
}

// Calls fn(block b of row r, the group's block b, r) for every row of `count` GGUF rows.
template <int kBlock, class Block, class GroupBlock, class Fn>
void for_each_block(const void* rows, size_t row_stride, int64_t n, int64_t count, void* groups, const Fn& fn) {
  const int64_t nb = n / kBlock;
  auto* out = static_cast<GroupBlock*>(groups);
  for (int64_t g = 0; g < count / kGroupRows; ++g) {
    for (int64_t b = 0; b < nb; ++b) {
      GroupBlock& gb = out[g * nb + b];
      for (int r = 0; r < kGroupRows; ++r) {
        const auto* row = static_cast<const uint8_t*>(rows) + static_cast<size_t>(g * kGroupRows + r) * row_stride;
        fn(reinterpret_cast<const Block*>(row)[b], gb, r);
      }
    }
  }
}

}  // namespace

WeightLayout parse_weight_layout(const std::string& name) {
  static constexpr SettingName<WeightLayout> kNames[] = {{"gguf", WeightLayout::kGgufRows},
                                                         {"row-groups", WeightLayout::kRowGroups}};
  return parse_setting<WeightLayout>(kWeightLayoutVariable, name, "a weight layout", kNames);
}

void set_weight_layout(WeightLayout layout) {
  setting().store(layout == WeightLayout::kRowGroups ? Setting::kRowGroups : Setting::kGgufRows);
}

bool has_row_groups(DType type) { return type == DType::Q4_0 || type == DType::Q4_K; }

WeightLayout weight_layout() {
  switch (setting().load()) {
    case Setting::kRowGroups: return WeightLayout::kRowGroups;
    case Setting::kGgufRows: return WeightLayout::kGgufRows;
    case Setting::kDefault: break;
  }
  return row_groups_simd_available() ? WeightLayout::kRowGroups : WeightLayout::kGgufRows;
}

bool groups_rows(DType type, int64_t rows) {
  return has_row_groups(type) && rows % kGroupRows == 0 && rows > 0 && weight_layout() == WeightLayout::kRowGroups;
}

size_t row_group_bytes(DType type, int64_t n) {
  check_type(type);
  const int64_t nb = n / dtype_block_elems(type);
  return static_cast<size_t>(nb) * (type == DType::Q4_0 ? sizeof(GroupBlockQ4_0) : sizeof(GroupBlockQ4_K));
}

void group_rows(DType type, const void* rows, size_t row_stride, int64_t n, int64_t count, void* groups) {
  check_type(type);
  if (count % kGroupRows != 0) fail("internal: {} rows do not make whole groups of {}", count, kGroupRows);
  if (type == DType::Q4_0) {
    for_each_block<kQ32, BlockQ4_0, GroupBlockQ4_0>(rows, row_stride, n, count, groups,
                                              [](const BlockQ4_0& in, GroupBlockQ4_0& out, int r) {
                                                out.d[r] = in.d;
                                                for (int g = 0; g < 4; ++g) std::memcpy(out.qs[g][r], in.qs + 4 * g, 4);
                                              });
    return;
  }
  for_each_block<kQK, BlockQ4_K, GroupBlockQ4_K>(rows, row_stride, n, count, groups,
                                            [](const BlockQ4_K& in, GroupBlockQ4_K& out, int r) {
                                              out.d[r] = in.d;
                                              out.dmin[r] = in.dmin;
                                              const ScalesK4 s = unpack_scales_k4(in.scales);
                                              for (int j = 0; j < 8; ++j) {
                                                out.scales[j][r] = s.sc[j];
                                                out.mins[j / 2][r][j % 2] = s.m[j];
                                              }
                                              for (int c = 0; c < 4; ++c) {
                                                for (int g = 0; g < 8; ++g) {
                                                  std::memcpy(out.qs[c][g][r], in.qs + 32 * c + 4 * g, 4);
                                                }
                                              }
                                            });
}

void ungroup_rows(DType type, const void* groups, int64_t n, int64_t first, int64_t count, void* rows,
                  size_t row_stride) {
  check_type(type);
  const int64_t nb = n / dtype_block_elems(type);
  for (int64_t i = 0; i < count; ++i) {
    const int64_t g = (first + i) / kGroupRows;
    const int r = static_cast<int>((first + i) % kGroupRows);
    auto* row = static_cast<uint8_t*>(rows) + static_cast<size_t>(i) * row_stride;
    for (int64_t b = 0; b < nb; ++b) {
      if (type == DType::Q4_0) {
        const GroupBlockQ4_0& in = static_cast<const GroupBlockQ4_0*>(groups)[g * nb + b];
        BlockQ4_0& out = reinterpret_cast<BlockQ4_0*>(row)[b];
        out.d = in.d[r];
        for (int k = 0; k < 4; ++k) std::memcpy(out.qs + 4 * k, in.qs[k][r], 4);
      } else {
        const GroupBlockQ4_K& in = static_cast<const GroupBlockQ4_K*>(groups)[g * nb + b];
        BlockQ4_K& out = reinterpret_cast<BlockQ4_K*>(row)[b];
        out.d = in.d[r];
        out.dmin = in.dmin[r];
        ScalesK4 s;
        for (int j = 0; j < 8; ++j) {
          s.sc[j] = in.scales[j][r];
          s.m[j] = in.mins[j / 2][r][j % 2];
        }
        pack_scales_k4(s, out.scales);
        for (int c = 0; c < 4; ++c) {
          for (int k = 0; k < 8; ++k) std::memcpy(out.qs + 32 * c + 4 * k, in.qs[c][k][r], 4);
        }
      }
    }
  }
}

size_t row_groups_activation_bytes(DType type, int64_t n) {
  check_type(type);
  return packed_layout_int8(n, static_cast<int>(dtype_block_elems(type))).total;
}

size_t row_groups_activation_stride(DType type, int64_t n) {
  return (row_groups_activation_bytes(type, n) + 63) / 64 * 64;
}

void pack_row_groups_activation(DType type, const float* x, int64_t n, void* packed) {
  check_type(type);
  pack_int8_blocks(x, n, packed, static_cast<int>(dtype_block_elems(type)));
}

// Per row r of a group and activation: the block's exact int32 sums, then
//   acc[r] = fma(float(sum), d_r * d_x, acc[r])                        (Q4_0: sum - 8 * xsum)
//   acc[r] = fma(float(min_sum), -(dmin_r * d_x), acc[r])              (Q4_K)
// which is what every SIMD lane does.
void matvec_row_groups_portable(DType type, const void* groups, int64_t n, const void* packed,
                                size_t packed_stride, int64_t m, float* y, int64_t ldy, int64_t rows) {
  check_type(type);
  const int block = static_cast<int>(dtype_block_elems(type));
  const int64_t nb = n / block;
  for (int64_t i = 0; i < m; ++i) {
    const PackedActivationInt8 x =
        packed_view_int8(static_cast<const uint8_t*>(packed) + static_cast<size_t>(i) * packed_stride, n, block);
    for (int64_t g = 0; g < rows / kGroupRows; ++g) {
      float acc[kGroupRows] = {};
      for (int64_t b = 0; b < nb; ++b) {
        const float dx = x.d[b];
        for (int r = 0; r < kGroupRows; ++r) {
          if (type == DType::Q4_0) {
            const GroupBlockQ4_0& gb = static_cast<const GroupBlockQ4_0*>(groups)[g * nb + b];
            const int8_t* xq = x.q + b * kQ32;
            int32_t sum = 0;
            for (int k = 0; k < 4; ++k) {
              for (int l = 0; l < 4; ++l) {
                const uint8_t byte = gb.qs[k][r][l];
                sum += (byte & 15) * xq[4 * k + l] + (byte >> 4) * xq[16 + 4 * k + l];
              }
            }
            sum -= 8 * x.sums[b];
            acc[r] = std::fma(static_cast<float>(sum), fp16_to_fp32(gb.d[r]) * dx, acc[r]);
          } else {
            const GroupBlockQ4_K& gb = static_cast<const GroupBlockQ4_K*>(groups)[g * nb + b];
            const int8_t* xq = x.q + b * kQK;
            int32_t sum = 0, min_sum = 0;
            for (int c = 0; c < 4; ++c) {
              int32_t lo = 0, hi = 0;
              for (int k = 0; k < 8; ++k) {
                for (int l = 0; l < 4; ++l) {
                  const uint8_t byte = gb.qs[c][k][r][l];
                  lo += (byte & 15) * xq[64 * c + 4 * k + l];
                  hi += (byte >> 4) * xq[64 * c + 32 + 4 * k + l];
                }
              }
              sum += gb.scales[2 * c][r] * lo + gb.scales[2 * c + 1][r] * hi;
            }
            for (int j = 0; j < 8; ++j) min_sum += gb.mins[j / 2][r][j % 2] * x.sums[b * 8 + j];
            acc[r] = std::fma(static_cast<float>(sum), fp16_to_fp32(gb.d[r]) * dx, acc[r]);
            acc[r] = std::fma(static_cast<float>(min_sum), -(fp16_to_fp32(gb.dmin[r]) * dx), acc[r]);
          }
        }
      }
      for (int r = 0; r < kGroupRows; ++r) y[i * ldy + g * kGroupRows + r] = acc[r];
    }
  }
}

bool row_groups_in_simd(DType type) { return has_row_groups(type) && row_groups_simd_available(); }

void matvec_row_groups(DType type, const void* groups, int64_t n, const void* packed, size_t packed_stride,
                       int64_t m, float* y, int64_t ldy, int64_t rows) {
  if (row_groups_in_simd(type)) {
    matvec_row_groups_simd(type, groups, n, packed, packed_stride, m, y, ldy, rows);
  } else {
    matvec_row_groups_portable(type, groups, n, packed, packed_stride, m, y, ldy, rows);
  }
}

}  // namespace deferkv
