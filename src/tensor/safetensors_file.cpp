#include "tensor/safetensors_file.h"

#include <limits>
#include <nlohmann/json.hpp>

#include "deferkv/error.h"

namespace deferkv {
namespace {

constexpr uint64_t kMaxHeaderBytes = 100ull << 20;  // the format's own limit

uint64_t element_bytes(const std::string& dtype) {
  if (dtype == "F32") return 4;
  if (dtype == "F16" || dtype == "BF16") return 2;
  return 0;
}

}  // namespace

int64_t SafetensorsTensor::n_elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

SafetensorsFile::SafetensorsFile(const std::string& path) : file_(std::make_unique<MappedFile>(path)) {
  const uint8_t* bytes = file_->data();
  const uint64_t size = file_->size();
  if (size < 8) fail("'{}' is not a safetensors file: {} bytes, shorter than the header size", path, size);
  uint64_t header_bytes = 0;
  for (int i = 7; i >= 0; --i) header_bytes = (header_bytes << 8) | bytes[i];
  if (header_bytes > kMaxHeaderBytes || header_bytes > size - 8) {
    fail("'{}' is not a safetensors file or is truncated: header of {} bytes in a file of {}", path, header_bytes, size);
  }
  const auto header = nlohmann::json::parse(bytes + 8, bytes + 8 + header_bytes, nullptr, false);
  if (!header.is_object()) fail("'{}': the safetensors header is not a JSON object", path);
  const uint64_t data_start = 8 + header_bytes;
  const uint64_t data_size = size - data_start;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object()) fail("'{}': __metadata__ is not an object", path);
      for (const auto& [key, value] : entry.items()) {
        if (!value.is_string()) fail("'{}': metadata '{}' is not a string", path, key);
        metadata_[key] = value.get<std::string>();
      }
      continue;
    }
    if (!entry.is_object() || !entry.contains("dtype") || !entry["dtype"].is_string() || !entry.contains("shape") ||
        !entry["shape"].is_array() || !entry.contains("data_offsets") || !entry["data_offsets"].is_array() ||
        entry["data_offsets"].size() != 2) {
      fail("'{}': tensor '{}' lacks dtype, shape or data_offsets [begin, end]", path, name);
    }
    SafetensorsTensor t;
    t.name = name;
    t.dtype = entry["dtype"].get<std::string>();
    const uint64_t width = element_bytes(t.dtype);
    if (width == 0) fail("'{}': tensor '{}' has dtype {}; only F32, F16 and BF16 are read", path, name, t.dtype);
    uint64_t elements = 1;
    for (const auto& d : entry["shape"]) {
      if (!d.is_number_unsigned() || d.get<uint64_t>() > (1ull << 40)) {
        fail("'{}': tensor '{}' has a bad dimension {}", path, name, d.dump());
      }
      const uint64_t dim = d.get<uint64_t>();
      if (dim != 0 && elements > std::numeric_limits<uint64_t>::max() / 8 / dim) {
        fail("'{}': tensor '{}' is too large", path, name);
      }
      elements *= dim;
      t.shape.push_back(static_cast<int64_t>(dim));
    }
    const auto& offsets = entry["data_offsets"];
    if (!offsets[0].is_number_unsigned() || !offsets[1].is_number_unsigned()) {
      fail("'{}': tensor '{}' has non-numeric data_offsets", path, name);
    }
    const uint64_t begin = offsets[0].get<uint64_t>(), end = offsets[1].get<uint64_t>();
    if (begin > end || end > data_size) {
      fail("'{}': tensor '{}' spans bytes [{}, {}) of a data section of {} (truncated file?)", path, name, begin, end,
           data_size);
    }
    if (end - begin != elements * width) {
      fail("'{}': tensor '{}' holds {} bytes, its shape and dtype need {}", path, name, end - begin, elements * width);
    }
    t.data = bytes + data_start + begin;
    t.nbytes = end - begin;
    tensors_.push_back(std::move(t));
  }
}

const SafetensorsTensor* SafetensorsFile::find(const std::string& name) const {
  for (const SafetensorsTensor& t : tensors_) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

const SafetensorsTensor& SafetensorsFile::tensor(const std::string& name) const {
  const SafetensorsTensor* t = find(name);
  if (t == nullptr) fail("'{}' has no tensor '{}'", path(), name);
  return *t;
}

}  // namespace deferkv
