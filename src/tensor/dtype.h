#pragma once
// Tensor element types as numbered in GGUF (ggml's type ids) and their block layouts.
// A "block" is the unit of quantisation: block_elems values stored in block_bytes bytes.
#include <cstdint>
#include <optional>
#include <string>

namespace deferkv {

enum class DType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q8_0 = 8,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  BF16 = 30,
};

// Layout facts for one ggml type id, including types deferkv can list but not compute with.
struct TypeLayout {
  const char* name;
  int64_t block_elems;  // 0 when the layout is not known to deferkv
  int64_t block_bytes;
  bool computable;  // deferkv has kernels for it (it is a DType)
};

// Layout of a raw ggml type id, or nullopt when the id is not a ggml type at all.
std::optional<TypeLayout> ggml_type_layout(uint32_t ggml_type);

// A printable name for any id ("Q2_K", or "type 77" when unknown).
std::string ggml_type_name(uint32_t ggml_type);

const char* dtype_name(DType type);
int64_t dtype_block_elems(DType type);
int64_t dtype_block_bytes(DType type);

// Bytes of a row of n elements; n must be a multiple of the block size.
inline int64_t dtype_row_bytes(DType type, int64_t n) {
  return n / dtype_block_elems(type) * dtype_block_bytes(type);
}

// Parses "f32", "F16", "q4_k", ... ; nullopt when not a DType.
std::optional<DType> dtype_from_name(const std::string& name);

// The list of DType names, for error messages and --help.
std::string dtype_names();

}  // namespace deferkv
