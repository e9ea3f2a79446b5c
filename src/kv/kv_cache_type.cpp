#include "kv/kv_cache_type.h"

#include <algorithm>
#include <array>

#include "base/setting.h"
#include "deferkv/error.h"

namespace deferkv {
namespace {

constexpr std::array kCacheTypes = {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0};

bool is_cache_type(DType type) { return std::find(kCacheTypes.begin(), kCacheTypes.end(), type) != kCacheTypes.end(); }

}  // namespace

std::string kv_cache_type_name(DType type) {
  return ascii_lower(dtype_name(type));
}

std::string kv_cache_type_names() {
  std::string names;
  for (DType type : kCacheTypes) names += (names.empty() ? "" : ", ") + kv_cache_type_name(type);
  return names;
}

DType kv_cache_type_from_name(const std::string& name) {
  const auto type = dtype_from_name(name);
  if (!type || !is_cache_type(*type)) fail("unknown KV cache type '{}' (valid: {})", name, kv_cache_type_names());
  return *type;
}

bool kv_cache_type_is_quantised(DType type) { return type == DType::Q8_0 || type == DType::Q4_0; }

void check_kv_cache_type(DType type, int64_t head_dim, const char* what) {
  if (!is_cache_type(type)) {
    fail("{} cache type {} cannot store a KV cache (valid: {})", what, dtype_name(type), kv_cache_type_names());
  }
  const int64_t block = dtype_block_elems(type);
  if (head_dim % block != 0) {
    fail("{} cache type {} stores blocks of {} values along a head, but the model's head_dim is {} (not a "
         "multiple of {}); use f16, bf16 or f32", what, kv_cache_type_name(type), block, head_dim, block);
  }
}

}  // namespace deferkv
