// GGUF files: the reader (header, metadata, tensor table), then what is built from a
// file that reads: the model (configuration, weight shapes and types) and its tokenizer.
// Asserts: only deferkv::Error escapes; every tensor the reader accepts lies inside the
// file at an aligned offset with the size its type and shape give; every metadata key is
// found again by name; reading the file and loading the model (accepted or not) holds at
// most 64 bytes of heap per byte of the file, plus 8 MiB (a metadata value takes 48 bytes
// however few its file bytes; a count trusted beyond the file would take far more).
#include <cstdint>
#include <string>

#include "deferkv/model.h"
#include "deferkv/tokenizer.h"
#include "fuzz_support.h"
#include "tensor/dtype.h"
#include "tensor/gguf_file.h"

using namespace deferkv;

namespace {

void check_tensors(const GgufFile& file) {
  const uint8_t* begin = nullptr;
  for (const GgufTensorInfo& t : file.tensors()) {
    if (begin == nullptr) begin = t.data - t.offset - file.data_offset();
    fuzz::require(t.offset % file.alignment() == 0, "tensor offsets are aligned");
    fuzz::require(file.data_offset() + t.offset + t.nbytes <= file.file_size(),
                  "tensor data lies inside the file");
    fuzz::require(t.data == begin + file.data_offset() + t.offset, "tensor data points at its offset");
    fuzz::require(t.n_dims >= 1 && t.n_dims <= 4, "tensor rank is 1..4");
    const auto type = static_cast<DType>(t.ggml_type);
    fuzz::require(dtype_block_elems(type) > 0, "tensor types have a known layout");
    fuzz::require(t.ne[0] % dtype_block_elems(type) == 0, "rows hold whole blocks");
    fuzz::require(static_cast<uint64_t>(dtype_row_bytes(type, t.ne[0]) * t.n_rows()) == t.nbytes,
                  "tensor size is its rows' bytes");
    fuzz::require(file.find_tensor(t.name) != nullptr, "tensors are found by name");
  }
  for (const auto& [key, value] : file.metadata()) {
    fuzz::require(file.find(key) == &value, "metadata keys are found by name");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const fuzz::ScratchDir scratch;
  const std::string path = scratch.write("input.gguf", fuzz::as_text(data, size));
  const int64_t peak = fuzz::HeapMeter::peak_during([&] {
    fuzz::accepts([&] {
      const GgufFile file(path);
      check_tensors(file);
      fuzz::accepts([&] { Tokenizer::from_gguf(file); });
      fuzz::accepts([&] { Model::load(path); });
    });
  });
  fuzz::require(peak <= 64 * static_cast<int64_t>(size) + (int64_t{8} << 20),
                "reading a GGUF holds at most 64 bytes of heap per file byte, plus 8 MiB");
  return 0;
}
