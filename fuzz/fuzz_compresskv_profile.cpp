// CompressKV profiles (JSON: model shape, retrieval heads per layer, layer scores).
// Asserts: only deferkv::Error escapes; a profile that loads is consistent (one list of
// heads and one score per layer, every head inside the model), and writing it out and
// reading it back gives the same profile.
#include <cstdint>
#include <string>

#include "fuzz_support.h"
#include "press/core/compresskv_profile.h"

using namespace deferkv;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const fuzz::ScratchDir scratch;
  const std::string path = scratch.write("input.json", fuzz::as_text(data, size));
  CompressKvProfile profile;
  if (!fuzz::accepts([&] { profile = load_compresskv_profile(path); })) return 0;
  fuzz::require(static_cast<int64_t>(profile.retrieval_heads.size()) == profile.n_layer &&
                    static_cast<int64_t>(profile.layer_scores.size()) == profile.n_layer,
                "one list of heads and one score per layer");
  for (const auto& heads : profile.retrieval_heads) {
    for (int64_t h : heads) fuzz::require(h >= 0 && h < profile.n_head, "heads lie inside the model");
  }
  const std::string copy = scratch.path() + "/copy.json";
  fuzz::require(fuzz::accepts([&] { save_compresskv_profile(copy, profile); }), "a profile that loads can be written");
  CompressKvProfile again;
  fuzz::require(fuzz::accepts([&] { again = load_compresskv_profile(copy); }), "a written profile reads back");
  fuzz::require(again.model_name == profile.model_name && again.n_layer == profile.n_layer &&
                    again.n_head == profile.n_head && again.retrieval_heads == profile.retrieval_heads &&
                    again.layer_scores == profile.layer_scores,
                "a profile written and read back is the same");
  return 0;
}
