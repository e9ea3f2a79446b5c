#pragma once
// Per-model files published as safetensors for methods trained per model (Q-Filters,
// Expected Attention's query statistics): the file is untrusted (fuzz/README.md "What a
// file may ask for"). SafetensorsFile checks every tensor's shape against its bytes before
// anything is read; here each tensor is checked for its rank and positive sizes before its
// values are converted, and every error names the file and the tensor.
//
// [OUR FORMULATION] Head dimension order (kvpress runs the Hugging Face model the file was
// made for and needs none): these files are written from Hugging Face transformers, whose RoPE
// rotates the pairs (i, i + d/2) of a head. A GGUF llama model rotates the pairs (2i, 2i+1):
// llama.cpp's converter permutes the rows of W_Q and W_K so, and model dimension 2i + h
// holds Hugging Face's dimension h * d/2 + i. Other architectures (Qwen's NEOX RoPE) keep
// Hugging Face's order.
#include <cstdint>
#include <string>
#include <vector>

namespace deferkv {

class SafetensorsFile;

struct TrainedTensor {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<float> values;  // row-major, as the file holds them
};

// A .safetensors file, or a folder holding model.safetensors (what PyTorchModelHubMixin's
// save_pretrained writes, the form the published files take on the Hugging Face hub).
std::string trained_safetensors_path(const std::string& path);

// Tensor `name` of the file, of `rank` dimensions each positive, as float32 (F32, F16 or
// BF16 in the file). `what` names the file's kind in errors ("Q-Filters file").
TrainedTensor read_trained_tensor(const SafetensorsFile& file, const std::string& what, const std::string& name,
                                  size_t rank);

// Which order a file's head dimensions are in: Hugging Face's (permuted for a model with
// interleaved RoPE, as above), or already the model's own.
enum class HeadDimOrder { kHuggingFace, kModel };
HeadDimOrder parse_head_dim_order(const std::string& name);  // "hf" | "model"

// The file's dimension that holds model dimension m of a head of d dimensions.
int64_t file_head_dim(int64_t m, int64_t d, HeadDimOrder order, bool interleaved_rope);

}  // namespace deferkv
