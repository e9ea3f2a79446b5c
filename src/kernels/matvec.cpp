// matvec.h entry points: activation packing per weight type and dispatch to the kernels
// (matvec is matvec_rows with one activation).
#include "kernels/matvec.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "base/setting.h"
#include "deferkv/error.h"
#include "kernels/matvec_kernels.h"
#include "kernels/packed_activation.h"
#include "kernels/quant_blocks.h"

namespace deferkv {
namespace {

std::atomic<KQuantActivation>& kquant_setting() {
  static std::atomic<KQuantActivation> setting{[] {
    const char* value = std::getenv(kKQuantActivationVariable);
    return value != nullptr && *value != '\0' ? parse_kquant_activation(value) : KQuantActivation::kInt8;
  }()};
  return setting;
}

// Block length of the packed integer activation, or 0 when the weights take float32 x.
int packed_block(DType weight_type) {
  switch (weight_type) {
    case DType::F32:
    case DType::F16:
    case DType::BF16: return 0;
    case DType::Q8_0:
    case DType::Q4_0: return kQ32;
    case DType::Q4_K:
    case DType::Q5_K:
    case DType::Q6_K: return kQK;
  }
  fail("matvec: unsupported weight type {}", static_cast<uint32_t>(weight_type));
}

}  // namespace

KQuantActivation parse_kquant_activation(const std::string& name) {
  static constexpr SettingName<KQuantActivation> kNames[] = {{"int16", KQuantActivation::kInt16},
                                                             {"int8", KQuantActivation::kInt8}};
  return parse_setting<KQuantActivation>(kKQuantActivationVariable, name, "a K-quant activation form", kNames);
}

KQuantActivation kquant_activation() { return kquant_setting().load(std::memory_order_relaxed); }

void set_kquant_activation(KQuantActivation form) { kquant_setting().store(form, std::memory_order_relaxed); }

bool takes_int8_activation(DType weight_type) {
  const bool has_int8_kernel = weight_type == DType::Q4_K || weight_type == DType::Q5_K || weight_type == DType::Q6_K;
  return has_int8_kernel && kquant_activation() == KQuantActivation::kInt8;
}

size_t packed_activation_bytes(DType weight_type, int64_t n) {
  if (takes_int8_activation(weight_type)) return packed_layout_int8(n).total;
  const int block = packed_block(weight_type);
  if (block == 0) return static_cast<size_t>(n) * sizeof(float);
  return packed_layout(n, block).total;
}

void pack_activation(DType weight_type, const float* x, int64_t n, void* packed) {
  if (takes_int8_activation(weight_type)) return pack_int8_blocks(x, n, packed);
  const int block = packed_block(weight_type);
  if (block == 0) {
    std::memcpy(packed, x, static_cast<size_t>(n) * sizeof(float));
  } else {
    pack_int16_blocks(x, n, block, packed);
  }
}

size_t packed_activation_stride(DType weight_type, int64_t n) {
  return (packed_activation_bytes(weight_type, n) + 63) / 64 * 64;
}

void matvec(DType weight_type, const void* weights, size_t row_stride, int64_t n, const void* packed_x,
            float* y, int64_t rows) {
  matvec_rows(weight_type, weights, row_stride, n, packed_x, 0, 1, y, rows, rows);
}

void matvec_rows(DType weight_type, const void* weights, size_t row_stride, int64_t n, const void* packed_x,
                 size_t packed_stride, int64_t m, float* y, int64_t ldy, int64_t rows) {
  const auto kernel = [&]() {
    switch (weight_type) {
      case DType::F32: return matvec_f32;
      case DType::F16: return matvec_f16;
      case DType::BF16: return matvec_bf16;
      case DType::Q8_0: return matvec_q8_0;
      case DType::Q4_0: return matvec_q4_0;
      case DType::Q4_K: return takes_int8_activation(DType::Q4_K) ? matvec_q4_k_int8 : matvec_q4_k;
      case DType::Q5_K: return takes_int8_activation(DType::Q5_K) ? matvec_q5_k_int8 : matvec_q5_k;
      case DType::Q6_K: return takes_int8_activation(DType::Q6_K) ? matvec_q6_k_int8 : matvec_q6_k;
    }
    fail("matvec: unsupported weight type {}", static_cast<uint32_t>(weight_type));
  }();
  kernel(weights, row_stride, n, packed_x, packed_stride, m, y, ldy, rows);
}

}  // namespace deferkv
