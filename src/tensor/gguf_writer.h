#pragma once
// Writes a GGUF version 3 file: metadata, tensor table and tensor data, laid out as
// ggml lays it out (tensor data aligned to general.alignment, default 32, each tensor
// padded to the alignment). Tensor bytes are streamed to the file at write() time from
// the caller's memory or from a callback, so a big model is never copied in memory.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "tensor/dtype.h"
#include "tensor/gguf_value.h"

namespace deferkv {

// Receives a tensor's bytes, in order, in pieces of any size.
using GgufByteSink = std::function<void(const void* bytes, size_t size)>;
// Produces a tensor's bytes by calling the sink, e.g. once per row as it quantises them.
using GgufTensorSource = std::function<void(const GgufByteSink& sink)>;

class GgufWriter {
 public:
  // Appends a metadata entry (file order is the order of the calls). "general.alignment"
  // also sets the tensor data alignment. Error when the key is repeated, is not UTF-8, or
  // the value does not match its type (an array item of another type, 300 as a UINT8).
  void add_metadata(const std::string& key, GgufValue value);

  // Appends a tensor. `ne` is in ggml order: ne[0] is the row length (1 to 4 dims).
  // `bytes` must stay valid until write() and hold exactly the tensor's size.
  void add_tensor(const std::string& name, DType type, std::vector<int64_t> ne, const void* bytes,
                  size_t size);
  void add_tensor(const std::string& name, uint32_t ggml_type, std::vector<int64_t> ne,
                  const void* bytes, size_t size);
  // As above, the bytes coming from `source` at write() time; it must produce exactly the
  // tensor's size.
  void add_tensor(const std::string& name, uint32_t ggml_type, std::vector<int64_t> ne,
                  GgufTensorSource source);

  // Writes the file to a temporary name in the same directory and renames it to `path`
  // once complete, so that a failure never leaves a partial file under `path`.
  void write(const std::string& path) const;

 private:
  struct Tensor {
    std::string name;
    uint32_t ggml_type;
    std::vector<int64_t> ne;
    uint64_t nbytes;
    GgufTensorSource source;
  };

  // Checks name, type and shape; returns the tensor's size in bytes.
  uint64_t check_tensor(const std::string& name, uint32_t ggml_type,
                        const std::vector<int64_t>& ne) const;

  std::vector<std::pair<std::string, GgufValue>> metadata_;
  std::set<std::string> keys_;
  std::vector<Tensor> tensors_;
  std::set<std::string> tensor_names_;
  uint32_t alignment_ = 32;
};

}  // namespace deferkv
