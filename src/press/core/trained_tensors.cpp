#include "press/core/trained_tensors.h"

#include <cstring>
#include <filesystem>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "deferkv/error.h"
#include "kernels/quant.h"
#include "tensor/safetensors_file.h"

namespace deferkv {

std::string trained_safetensors_path(const std::string& path) {
  if (std::filesystem::is_directory(path)) return (std::filesystem::path(path) / "model.safetensors").string();
  return path;
}

TrainedTensor read_trained_tensor(const SafetensorsFile& file, const std::string& what, const std::string& name,
                                  size_t rank) {
  const SafetensorsTensor* t = file.find(name);
  if (t == nullptr) fail("{} '{}': tensor '{}' is missing", what, file.path(), name);
  if (t->shape.size() != rank) {
    fail("{} '{}': tensor '{}' has {} dimensions, expected {}", what, file.path(), name, t->shape.size(), rank);
  }
  for (int64_t n : t->shape) {
    if (n <= 0) fail("{} '{}': tensor '{}' has shape [{}], every size must be positive", what, file.path(), name, fmt::join(t->shape, ", "));
  }
  // The reader has matched the byte range to the shape: the values are there to convert.
  TrainedTensor out{name, t->shape, std::vector<float>(static_cast<size_t>(t->n_elements()))};
  if (t->dtype == "F32") {
    std::memcpy(out.values.data(), t->data, t->nbytes);
    return out;
  }
  std::vector<uint16_t> halves(out.values.size());  // the data need not be aligned
  std::memcpy(halves.data(), t->data, t->nbytes);
  const DType type = t->dtype == "F16" ? DType::F16 : DType::BF16;
  dequantize_row(type, halves.data(), out.values.data(), static_cast<int64_t>(halves.size()));
  return out;
}

HeadDimOrder parse_head_dim_order(const std::string& name) {
  return name == "model" ? HeadDimOrder::kModel : HeadDimOrder::kHuggingFace;
}

int64_t file_head_dim(int64_t m, int64_t d, HeadDimOrder order, bool interleaved_rope) {
  if (order == HeadDimOrder::kModel || !interleaved_rope) return m;
  return (m % 2) * (d / 2) + m / 2;
}

}  // namespace deferkv
