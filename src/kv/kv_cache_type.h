#pragma once
// The storage types of the KV cache, named as llama.cpp's -ctk/-ctv name them.
#include <cstdint>
#include <string>

#include "tensor/dtype.h"

namespace deferkv {

// Keys and values are stored separately, each in one of f32, f16, bf16, q8_0, q4_0.
struct KvCacheTypes {
  DType keys = DType::F16;
  DType values = DType::F16;
};

// "f16" -> DType::F16 (case-insensitive); fails naming the name and listing the types.
DType kv_cache_type_from_name(const std::string& name);
// The lower-case name ("q8_0"), as the flags and every report spell it.
std::string kv_cache_type_name(DType type);
// "f32, f16, bf16, q8_0, q4_0".
std::string kv_cache_type_names();

// q8_0 and q4_0: the types stored rotated (KvRowCoding, kv_cache.h).
bool kv_cache_type_is_quantised(DType type);

// Fails unless `type` is a cache type whose blocks tile a head of head_dim values.
// `what` names the side ("key", "value") in the message.
void check_kv_cache_type(DType type, int64_t head_dim, const char* what);

}  // namespace deferkv
