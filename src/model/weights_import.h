#pragma once
// Turns trained weights into a GGUF model our engine (and llama.cpp) loads: a safetensors
// file whose tensors carry GGUF names (token_embd.weight, blk.N.attn_q.weight, ...) in
// PyTorch's [out, in] layout, and whose __metadata__ gives the hyperparameters, plus the
// tokenizer of another GGUF. tools/train/export.py writes such files; its README lists
// the keys. Matrices are stored in the chosen type, norms in F32.
#include <string>
#include <vector>

#include "tensor/dtype.h"

namespace deferkv {

struct WeightsImport {
  std::string weights;  // safetensors file
  std::string vocab;    // GGUF whose tokenizer.* metadata to copy
  std::string output;   // GGUF to write (written whole or not at all)
  DType type = DType::F16;
  std::string name;     // general.name; default: the metadata's "name", else the file's stem
};

// Errors name the file and the problem: a missing or unparsable hyperparameter, an
// unsupported architecture, a missing tensor, a shape that does not match the
// hyperparameters, a vocabulary size other than the tokenizer's, a row length that the
// chosen type's blocks do not divide.
void import_weights(const WeightsImport& request);

struct SafetensorsTensor;
// A safetensors tensor's values as float32, in row-major order (F32, F16 or BF16 data).
std::vector<float> safetensors_values(const SafetensorsTensor& tensor);

}  // namespace deferkv
