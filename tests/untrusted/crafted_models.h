#pragma once
// Model files whose metadata says more than their tensors hold, made from the small random
// models of the tests (model/test_models.h) by changing one key.
#include <string>
#include <vector>

#include "model/test_models.h"
#include "tensor/gguf_file.h"
#include "tensor/gguf_writer.h"

namespace deferkv::testing {

// A 2-layer model of `arch`, 64 wide: a few hundred KB.
inline RandomModelSpec two_layer_spec(Architecture arch = Architecture::kLlama) {
  RandomModelSpec spec;
  spec.arch = arch;
  spec.n_embd = 64;
  spec.n_head = 2;
  spec.n_head_kv = 1;
  spec.n_ff = 128;
  spec.n_layer = 2;
  return spec;
}

// Writes to `out` the random model of `spec` with metadata `key` set to the u32 `value`
// (as make-model writes its counts), every tensor as it was; returns `out`.
inline std::string model_with_u32(const RandomModelSpec& spec, const std::string& key, uint32_t value,
                                  const std::string& out) {
  GgufFile source(random_model_path(spec));
  GgufWriter writer;
  for (auto [k, v] : source.metadata()) writer.add_metadata(k, k == key ? GgufValue::of_u32(value) : v);
  for (const auto& t : source.tensors()) {
    writer.add_tensor(t.name, t.ggml_type, std::vector<int64_t>(t.ne.begin(), t.ne.begin() + t.n_dims), t.data,
                      t.nbytes);
  }
  writer.write(out);
  return out;
}

}  // namespace deferkv::testing
