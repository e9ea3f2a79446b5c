#include "tensor/dtype.h"

#include <algorithm>
#include <array>
#include <cctype>

#include <fmt/format.h>

#include "deferkv/error.h"

namespace deferkv {
namespace {

struct KnownType {
  uint32_t id;
  TypeLayout layout;
};

// ggml's type ids (ggml.h). Sizes are listed for the types whose block layout is
// simple to state, so that `inspect` and the GGUF bounds checks can handle files
// holding them even though there are no kernels for them.
constexpr std::array<KnownType, 31> kKnownTypes = {{
    {0, {"F32", 1, 4, true}},
    {1, {"F16", 1, 2, true}},
    {2, {"Q4_0", 32, 18, true}},
    {3, {"Q4_1", 32, 20, false}},
    {6, {"Q5_0", 32, 22, false}},
    {7, {"Q5_1", 32, 24, false}},
    {8, {"Q8_0", 32, 34, true}},
    {9, {"Q8_1", 32, 36, false}},
    {10, {"Q2_K", 256, 84, false}},
    {11, {"Q3_K", 256, 110, false}},
    {12, {"Q4_K", 256, 144, true}},
    {13, {"Q5_K", 256, 176, true}},
    {14, {"Q6_K", 256, 210, true}},
    {15, {"Q8_K", 256, 292, false}},
    {16, {"IQ2_XXS", 256, 66, false}},
    {17, {"IQ2_XS", 256, 74, false}},
    {18, {"IQ3_XXS", 256, 98, false}},
    {19, {"IQ1_S", 256, 50, false}},
    {20, {"IQ4_NL", 32, 18, false}},
    {21, {"IQ3_S", 256, 110, false}},
    {22, {"IQ2_S", 256, 82, false}},
    {23, {"IQ4_XS", 256, 136, false}},
    {24, {"I8", 1, 1, false}},
    {25, {"I16", 1, 2, false}},
    {26, {"I32", 1, 4, false}},
    {27, {"I64", 1, 8, false}},
    {28, {"F64", 1, 8, false}},
    {29, {"IQ1_M", 256, 56, false}},
    {30, {"BF16", 1, 2, true}},
    {34, {"TQ1_0", 256, 54, false}},
    {35, {"TQ2_0", 256, 66, false}},
}};

const TypeLayout& layout_of(DType type) {
  for (const auto& known : kKnownTypes) {
    if (known.id == static_cast<uint32_t>(type)) return known.layout;
  }
  fail("internal: DType {} has no layout", static_cast<uint32_t>(type));
}

constexpr std::array<DType, 8> kDTypes = {DType::F32,  DType::F16,  DType::BF16, DType::Q8_0,
                                          DType::Q4_0, DType::Q4_K, DType::Q5_K, DType::Q6_K};

}  // namespace

std::optional<TypeLayout> ggml_type_layout(uint32_t ggml_type) {
  for (const auto& known : kKnownTypes) {
    if (known.id == ggml_type) return known.layout;
  }
  return std::nullopt;
}

std::string ggml_type_name(uint32_t ggml_type) {
  auto layout = ggml_type_layout(ggml_type);
  return layout ? std::string(layout->name) : fmt::format("type {}", ggml_type);
}

const char* dtype_name(DType type) { return layout_of(type).name; }
int64_t dtype_block_elems(DType type) { return layout_of(type).block_elems; }
int64_t dtype_block_bytes(DType type) { return layout_of(type).block_bytes; }

std::optional<DType> dtype_from_name(const std::string& name) {
  std::string upper = name;
  std::transform(upper.begin(), upper.end(), upper.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  for (DType type : kDTypes) {
    if (upper == dtype_name(type)) return type;
  }
  return std::nullopt;
}

std::string dtype_names() {
  std::string names;
  for (DType type : kDTypes) {
    if (!names.empty()) names += ", ";
    names += dtype_name(type);
  }
  return names;
}

}  // namespace deferkv
