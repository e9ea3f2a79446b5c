// Dumps llama.cpp's logits of every position of a token sequence, as float32, so the
// engine's forward pass can be checked against an engine that shares none of its code
// (tests/data/reference/*.llamacpp_kvf32.logits). Not part of the build: compile it
// against a llama.cpp checkout as scripts/reference/README.md shows.
//   llamacpp_logits MODEL.gguf OUT.logits TOKEN...
// OUT holds n_tokens x n_vocab float32 values, position by position, computed in one batch
// with an f32 KV cache and flash attention off (the engine's test uses the same).
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "llama.h"

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s MODEL.gguf OUT.logits TOKEN...\n", argv[0]);
    return 1;
  }
  std::vector<llama_token> tokens;
  for (int i = 3; i < argc; ++i) tokens.push_back(std::atoi(argv[i]));

  llama_backend_init();
  llama_model_params model_params = llama_model_default_params();
  model_params.n_gpu_layers = 0;
  llama_model* model = llama_model_load_from_file(argv[1], model_params);
  if (model == nullptr) {
    std::fprintf(stderr, "cannot load %s\n", argv[1]);
    return 1;
  }
  llama_context_params ctx_params = llama_context_default_params();
  ctx_params.n_ctx = static_cast<uint32_t>(tokens.size()) + 16;
  ctx_params.n_batch = ctx_params.n_ubatch = static_cast<uint32_t>(tokens.size());
  ctx_params.n_threads = ctx_params.n_threads_batch = 1;
  ctx_params.type_k = ctx_params.type_v = GGML_TYPE_F32;
  ctx_params.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
  llama_context* ctx = llama_init_from_model(model, ctx_params);
  if (ctx == nullptr) {
    std::fprintf(stderr, "cannot make a context\n");
    return 1;
  }

  llama_batch batch = llama_batch_init(static_cast<int32_t>(tokens.size()), 0, 1);
  for (size_t i = 0; i < tokens.size(); ++i) {
    batch.token[i] = tokens[i];
    batch.pos[i] = static_cast<llama_pos>(i);
    batch.n_seq_id[i] = 1;
    batch.seq_id[i][0] = 0;
    batch.logits[i] = 1;
  }
  batch.n_tokens = static_cast<int32_t>(tokens.size());
  if (llama_decode(ctx, batch) != 0) {
    std::fprintf(stderr, "llama_decode failed\n");
    return 1;
  }
  const int32_t n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
  std::FILE* out = std::fopen(argv[2], "wb");
  if (out == nullptr) {
    std::fprintf(stderr, "cannot write %s\n", argv[2]);
    return 1;
  }
  for (size_t i = 0; i < tokens.size(); ++i) {
    std::fwrite(llama_get_logits_ith(ctx, static_cast<int32_t>(i)), sizeof(float), static_cast<size_t>(n_vocab), out);
  }
  std::fclose(out);
  llama_batch_free(batch);
  llama_free(ctx);
  llama_model_free(model);
  std::printf("%zu positions x %d logits -> %s\n", tokens.size(), n_vocab, argv[2]);
  return 0;
}
