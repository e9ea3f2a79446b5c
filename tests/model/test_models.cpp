#include "model/test_models.h"

#include <filesystem>

#include <fmt/format.h>

#include "support/scratch_dir.h"

namespace deferkv::testing {

std::string stories_model_path() { return std::string(DEFERKV_SOURCE_DIR) + "/models/stories260K.gguf"; }

std::string random_model_path(const RandomModelSpec& s) {
  const std::string path = scratch_file(fmt::format("{}-{}-e{}-l{}-h{}-kv{}-hd{}-ff{}-t{}-r{}-a{}-s{}.gguf",
                                                    architecture_name(s.arch),
                                                    s.mix == WeightMix::kUniform ? std::string(dtype_name(s.weight_type))
                                                                                 : std::string("mix_") + weight_mix_name(s.mix),
                                                    s.n_embd, s.n_layer, s.n_head, s.n_head_kv, s.head_dim, s.n_ff,
                                                    s.tied_output, s.llama3_rope_factors, s.attention_only, s.seed));
  if (!std::filesystem::exists(path)) write_random_model(s, stories_model_path(), path);
  return path;
}

}  // namespace deferkv::testing
