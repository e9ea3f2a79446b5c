#include "model/gguf_model_metadata.h"

#include "deferkv/error.h"
#include "tensor/gguf_file.h"
#include "tensor/gguf_writer.h"

namespace deferkv {
namespace {

GgufValue u32(int64_t value) { return GgufValue::of_u32(static_cast<uint32_t>(value)); }

}  // namespace

int64_t gguf_vocab_size(const GgufFile& vocab) {
  const GgufValue* tokens = vocab.find("tokenizer.ggml.tokens");
  if (tokens == nullptr) fail("'{}' has no tokenizer.ggml.tokens", vocab.path());
  return static_cast<int64_t>(tokens->as_array("tokenizer.ggml.tokens").items.size());
}

void add_model_metadata(GgufWriter& w, const GgufModelShape& s, const GgufFile& vocab, const std::string& name,
                        uint32_t file_type) {
  const std::string arch = architecture_name(s.arch);
  const std::string p = arch + ".";
  w.add_metadata("general.architecture", GgufValue::of_string(arch));
  w.add_metadata("general.name", GgufValue::of_string(name));
  w.add_metadata("general.file_type", GgufValue::of_u32(file_type));
  w.add_metadata("general.alignment", GgufValue::of_u32(32));
  w.add_metadata(p + "context_length", u32(s.n_ctx));
  w.add_metadata(p + "embedding_length", u32(s.n_embd));
  w.add_metadata(p + "block_count", u32(s.n_layer));
  w.add_metadata(p + "feed_forward_length", u32(s.n_ff));
  w.add_metadata(p + "attention.head_count", u32(s.n_head));
  w.add_metadata(p + "attention.head_count_kv", u32(s.n_head_kv));
  w.add_metadata(p + "attention.key_length", u32(s.head_dim));
  w.add_metadata(p + "attention.value_length", u32(s.head_dim));
  w.add_metadata(p + "attention.layer_norm_rms_epsilon", GgufValue::of_f32(s.rms_eps));
  w.add_metadata(p + "rope.freq_base", GgufValue::of_f32(s.rope_base));
  w.add_metadata(p + "rope.dimension_count", u32(s.head_dim));
  w.add_metadata(p + "vocab_size", u32(s.n_vocab));
  for (const auto& [key, value] : vocab.metadata()) {
    if (key.rfind("tokenizer.", 0) == 0) w.add_metadata(key, value);
  }
}

}  // namespace deferkv
