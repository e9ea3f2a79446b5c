#pragma once
// Reads a GGUF file (versions 2 and 3): metadata, tensor table and tensor data,
// memory-mapped and used in place. Every count, size and offset is checked against
// the file before it is used, so a corrupt file gives an Error, never a crash or a
// huge allocation.
#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/mapped_file.h"
#include "tensor/dtype.h"
#include "tensor/gguf_value.h"

namespace deferkv {

// A tensor of the file, as ggml lays it out: ne[0] is the fastest-varying dimension
// (the row length), ne[1] the number of rows, and so on.
struct GgufTensorInfo {
  std::string name;
  uint32_t ggml_type = 0;
  uint32_t n_dims = 0;
  std::array<int64_t, 4> ne = {1, 1, 1, 1};
  uint64_t offset = 0;  // from the start of the data section
  uint64_t nbytes = 0;
  const uint8_t* data = nullptr;  // into the mapping

  int64_t n_elements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
  int64_t n_rows() const { return ne[1] * ne[2] * ne[3]; }
  std::string shape_string() const;
};

class GgufFile {
 public:
  static constexpr uint32_t kDefaultAlignment = 32;

  explicit GgufFile(const std::string& path);

  const std::string& path() const { return file_->path(); }
  uint32_t version() const { return version_; }
  uint32_t alignment() const { return alignment_; }
  size_t file_size() const { return file_->size(); }
  uint64_t data_offset() const { return data_offset_; }

  // Metadata in file order.
  const std::vector<std::pair<std::string, GgufValue>>& metadata() const { return metadata_; }
  const GgufValue* find(const std::string& key) const;
  const GgufValue& get(const std::string& key) const;  // Error naming the key when absent

  // Typed reads; a missing key or another type is an Error naming the key and the file.
  std::string get_string(const std::string& key) const;
  uint64_t get_u64(const std::string& key) const;
  uint64_t get_u64_or(const std::string& key, uint64_t fallback) const;
  double get_f64_or(const std::string& key, double fallback) const;
  bool get_bool_or(const std::string& key, bool fallback) const;
  std::optional<std::string> get_string_opt(const std::string& key) const;

  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  const GgufTensorInfo* find_tensor(const std::string& name) const;
  // A tensor's bytes were copied elsewhere (MappedFile::release_pages).
  void release_pages(const GgufTensorInfo& info) const { file_->release_pages(info.data, info.nbytes); }

 private:
  void parse();
  // How errors name a key: "<key>' of '<path>" fits GgufValue's "metadata '<what>' ...".
  std::string describe(const std::string& key) const { return key + "' of '" + path(); }

  std::shared_ptr<MappedFile> file_;
  uint32_t version_ = 0;
  uint32_t alignment_ = kDefaultAlignment;
  uint64_t data_offset_ = 0;
  std::vector<std::pair<std::string, GgufValue>> metadata_;
  std::map<std::string, size_t> metadata_index_;
  std::vector<GgufTensorInfo> tensors_;
  std::map<std::string, size_t> tensor_index_;
};

}  // namespace deferkv
