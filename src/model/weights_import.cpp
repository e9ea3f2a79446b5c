#include "model/weights_import.h"

#include <charconv>
#include <cstring>
#include <deque>
#include <filesystem>
#include <set>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "deferkv/error.h"
#include "kernels/float_rows.h"
#include "kernels/quant.h"
#include "model/gguf_model_metadata.h"
#include "model/weight_mix.h"
#include "tensor/gguf_file.h"
#include "tensor/gguf_writer.h"
#include "tensor/safetensors_file.h"

namespace deferkv {
namespace {

int64_t integer_entry(const SafetensorsFile& file, const std::string& key) {
  const auto it = file.metadata().find(key);
  if (it == file.metadata().end()) fail("'{}': metadata lacks '{}'", file.path(), key);
  int64_t value = 0;
  const char* end = it->second.data() + it->second.size();
  const auto [ptr, ec] = std::from_chars(it->second.data(), end, value);
  if (ec != std::errc() || ptr != end || value <= 0) {
    fail("'{}': metadata '{}' = '{}' is not a positive integer", file.path(), key, it->second);
  }
  return value;
}

float float_entry(const SafetensorsFile& file, const std::string& key) {
  const auto it = file.metadata().find(key);
  if (it == file.metadata().end()) fail("'{}': metadata lacks '{}'", file.path(), key);
  try {
    size_t used = 0;
    const float value = std::stof(it->second, &used);
    if (used == it->second.size() && value > 0) return value;
  } catch (const std::exception&) {
  }
  fail("'{}': metadata '{}' = '{}' is not a positive number", file.path(), key, it->second);
}

GgufModelShape read_shape(const SafetensorsFile& file) {
  const auto arch = file.metadata().find("architecture");
  if (arch == file.metadata().end()) fail("'{}': metadata lacks 'architecture'", file.path());
  if (arch->second != "llama") fail("'{}': architecture '{}' cannot be imported (only llama)", file.path(), arch->second);
  GgufModelShape s;
  s.arch = Architecture::kLlama;
  s.n_embd = integer_entry(file, "n_embd");
  s.n_layer = integer_entry(file, "n_layer");
  s.n_head = integer_entry(file, "n_head");
  s.n_head_kv = integer_entry(file, "n_head_kv");
  s.n_ff = integer_entry(file, "n_ff");
  s.n_ctx = integer_entry(file, "n_ctx");
  s.n_vocab = integer_entry(file, "n_vocab");
  s.rope_base = float_entry(file, "rope_base");
  s.rms_eps = float_entry(file, "rms_eps");
  if (s.n_embd % s.n_head != 0 || s.n_head % s.n_head_kv != 0) {
    fail("'{}': n_embd {} / n_head {} / n_head_kv {} do not divide", file.path(), s.n_embd, s.n_head, s.n_head_kv);
  }
  s.head_dim = s.n_embd / s.n_head;
  return s;
}

class TensorCopier {
 public:
  TensorCopier(const SafetensorsFile& file, GgufWriter& writer) : file_(file), writer_(writer) {}

  // A [rows, cols] PyTorch matrix stored as `type` (ggml ne = [cols, rows]).
  void matrix(const std::string& name, int64_t rows, int64_t cols, DType type) {
    const SafetensorsTensor& t = checked(name, {rows, cols});
    if (cols % dtype_block_elems(type) != 0) {
      fail("'{}': tensor {} has rows of {} values, not a multiple of {}'s block size {}", file_.path(), name, cols,
           dtype_name(type), dtype_block_elems(type));
    }
    writer_.add_tensor(name, static_cast<uint32_t>(type), {cols, rows}, [&t, rows, cols, type](const GgufByteSink& sink) {
      const std::vector<float> values = safetensors_values(t);
      std::vector<uint8_t> packed(static_cast<size_t>(dtype_row_bytes(type, cols)));
      for (int64_t r = 0; r < rows; ++r) {
        quantize_row(type, values.data() + r * cols, packed.data(), cols);
        sink(packed.data(), packed.size());
      }
    });
  }

  void vector(const std::string& name, int64_t n) {
    const SafetensorsTensor& t = checked(name, {n});
    owned_.push_back(safetensors_values(t));
    writer_.add_tensor(name, DType::F32, {n}, owned_.back().data(), owned_.back().size() * sizeof(float));
  }

  // Error naming a tensor of the file that no call asked for (a misspelt name would
  // otherwise be dropped silently).
  void check_all_used() const {
    for (const SafetensorsTensor& t : file_.tensors()) {
      if (!used_.contains(t.name)) fail("'{}': unexpected tensor '{}'", file_.path(), t.name);
    }
  }

 private:
  const SafetensorsTensor& checked(const std::string& name, const std::vector<int64_t>& shape) {
    const SafetensorsTensor& t = file_.tensor(name);
    used_.insert(name);
    if (t.shape != shape) {
      fail("'{}': tensor {} has shape [{}], the hyperparameters need [{}]", file_.path(), name, fmt::join(t.shape, ", "),
           fmt::join(shape, ", "));
    }
    return t;
  }

  const SafetensorsFile& file_;
  GgufWriter& writer_;
  std::deque<std::vector<float>> owned_;  // 1-D tensors live until write()
  std::set<std::string> used_;
};

}  // namespace

void import_weights(const WeightsImport& request) {
  const SafetensorsFile file(request.weights);
  const GgufFile vocab(request.vocab);
  const GgufModelShape s = read_shape(file);
  if (s.n_vocab != gguf_vocab_size(vocab)) {
    fail("'{}' has {} embedding rows but the tokenizer of '{}' has {} tokens", request.weights, s.n_vocab,
         request.vocab, gguf_vocab_size(vocab));
  }
  std::string name = request.name;
  if (name.empty()) {
    const auto it = file.metadata().find("name");
    name = it != file.metadata().end() ? it->second : std::filesystem::path(request.weights).stem().string();
  }

  GgufWriter w;
  add_model_metadata(w, s, vocab, name, llama_file_type(WeightMix::kUniform, request.type));
  const auto description = file.metadata().find("description");
  if (description != file.metadata().end()) {
    w.add_metadata("general.description", GgufValue::of_string(description->second));
  }
  TensorCopier copy(file, w);
  const int64_t q_dim = s.n_head * s.head_dim, kv_dim = s.n_head_kv * s.head_dim;
  copy.matrix("token_embd.weight", s.n_vocab, s.n_embd, request.type);
  copy.vector("output_norm.weight", s.n_embd);
  if (file.find("output.weight") != nullptr) copy.matrix("output.weight", s.n_vocab, s.n_embd, request.type);
  for (int64_t l = 0; l < s.n_layer; ++l) {
    auto name_of = [l](const char* suffix) { return fmt::format("blk.{}.{}", l, suffix); };
    copy.vector(name_of("attn_norm.weight"), s.n_embd);
    copy.matrix(name_of("attn_q.weight"), q_dim, s.n_embd, request.type);
    copy.matrix(name_of("attn_k.weight"), kv_dim, s.n_embd, request.type);
    copy.matrix(name_of("attn_v.weight"), kv_dim, s.n_embd, request.type);
    copy.matrix(name_of("attn_output.weight"), s.n_embd, q_dim, request.type);
    copy.vector(name_of("ffn_norm.weight"), s.n_embd);
    copy.matrix(name_of("ffn_gate.weight"), s.n_ff, s.n_embd, request.type);
    copy.matrix(name_of("ffn_up.weight"), s.n_ff, s.n_embd, request.type);
    copy.matrix(name_of("ffn_down.weight"), s.n_embd, s.n_ff, request.type);
  }
  copy.check_all_used();
  w.write(request.output);
}

std::vector<float> safetensors_values(const SafetensorsTensor& tensor) {
  std::vector<float> values(static_cast<size_t>(tensor.n_elements()));
  if (tensor.dtype == "F32") {
    std::memcpy(values.data(), tensor.data, tensor.nbytes);
    return values;
  }
  // The data has no alignment guarantee: copy the 16-bit values out first.
  std::vector<uint16_t> halves(values.size());
  std::memcpy(halves.data(), tensor.data, tensor.nbytes);
  const auto n = static_cast<int64_t>(values.size());
  if (tensor.dtype == "F16") {
    fp16_row_to_fp32(halves.data(), values.data(), n);
  } else {
    bf16_row_to_fp32(halves.data(), values.data(), n);
  }
  return values;
}

}  // namespace deferkv
