// Safetensors files (trained weights on their way into a GGUF model). Asserts: only
// deferkv::Error escapes; every tensor the reader accepts lies inside the file, holds the
// bytes its dtype and shape need, converts to exactly n_elements floats, and is found
// again by name.
#include <cstdint>
#include <string>

#include "fuzz_support.h"
#include "model/weights_import.h"
#include "tensor/safetensors_file.h"

using namespace deferkv;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const fuzz::ScratchDir scratch;
  const std::string path = scratch.write("input.safetensors", fuzz::as_text(data, size));
  fuzz::accepts([&] {
    const SafetensorsFile file(path);
    for (const SafetensorsTensor& t : file.tensors()) {
      const uint64_t width = t.dtype == "F32" ? 4 : 2;
      fuzz::require(t.dtype == "F32" || t.dtype == "F16" || t.dtype == "BF16", "only float dtypes are read");
      fuzz::require(t.nbytes == static_cast<uint64_t>(t.n_elements()) * width, "size matches dtype and shape");
      // safetensors_values reads every byte of the range, so a range past the mapping faults.
      fuzz::require(t.nbytes <= size, "tensor data fits in the file");
      fuzz::require(safetensors_values(t).size() == static_cast<size_t>(t.n_elements()), "every element converts");
      fuzz::require(file.find(t.name) != nullptr, "tensors are found by name");
    }
  });
  return 0;
}
