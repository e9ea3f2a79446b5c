#pragma once
// Reads a safetensors file (8-byte little-endian header size, a JSON header naming each
// tensor's dtype, shape and byte range, then the data), memory-mapped. Every range is
// checked against the file, so a truncated or corrupt file is an Error naming the
// problem. Only the float types are accepted (F32, F16, BF16): the file carries trained
// weights on their way into a GGUF model.
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/mapped_file.h"

namespace deferkv {

struct SafetensorsTensor {
  std::string name;
  std::string dtype;            // "F32", "F16" or "BF16"
  std::vector<int64_t> shape;   // row-major, as PyTorch: shape.back() is the row length
  const uint8_t* data = nullptr;
  uint64_t nbytes = 0;

  int64_t n_elements() const;
};

class SafetensorsFile {
 public:
  explicit SafetensorsFile(const std::string& path);

  const std::string& path() const { return file_->path(); }
  // The header's "__metadata__" (string to string), empty when absent.
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const std::vector<SafetensorsTensor>& tensors() const { return tensors_; }
  // nullptr when absent.
  const SafetensorsTensor* find(const std::string& name) const;
  // Error naming the tensor and the file when absent.
  const SafetensorsTensor& tensor(const std::string& name) const;

 private:
  std::unique_ptr<MappedFile> file_;
  std::map<std::string, std::string> metadata_;
  std::vector<SafetensorsTensor> tensors_;
};

}  // namespace deferkv
