#pragma once
// The offline calibration CompressKV runs on a model, as a JSON file:
//   {"format": "deferkv-compresskv-profile/1",
//    "model": {"name": "...", "n_layer": L, "n_head": H},
//    "retrieval_heads": [[h, h, ...], ...],   // per layer, query heads best first
//    "layer_scores": [u_0, ..., u_{L-1}]}     // error sensitivity, L1-normalised
// retrieval_heads are the semantic retrieval heads (docs/methods/compresskv.md, offline A), layer_scores the
// error-aware layer scores (offline B).
#include <cstdint>
#include <string>
#include <vector>

namespace deferkv {

struct CompressKvProfile {
  std::string model_name;
  int64_t n_layer = 0;
  int64_t n_head = 0;
  std::vector<std::vector<int64_t>> retrieval_heads;
  std::vector<double> layer_scores;
};

// Reads and checks a profile; every problem is an error naming the file and field.
CompressKvProfile load_compresskv_profile(const std::string& path);
// Writes a profile (a temporary file, then a rename).
void save_compresskv_profile(const std::string& path, const CompressKvProfile& profile);

}  // namespace deferkv
