#pragma once
// DeferKV's temporal weighting [docs/methods/deferkv.md, step 3]: how the prompt window's and
// the first d decode queries' attention combine into one score per entry.
#include <cstdint>
#include <vector>

namespace deferkv {

struct TemporalFusion {
  std::vector<float> window_weights;  // weight of each window query, oldest first
  std::vector<float> decode_weights;  // weight of decode step s at [s - 1]
  float normaliser = 1.0f;            // Z

  // block: the window (the mean of its queries) is one observation one step older than
  // decode step 1: weights eta^d / w per window query and eta^(d-s) for step s.
  // per_query: every query discounted by its own age: eta^(d + w-1-i) for window query
  // i, eta^(d-s) for step s. Z is the sum of all weights. Without decode feedback only
  // the window counts: 1/w each (block, exactly SnapKV's score) or eta^(w-1-i).
  static TemporalFusion make(int64_t window, int64_t d, double eta, bool per_query, bool decode_feedback);

  // F[j] for j < n: (window-weighted prompt attention + sum_s weight_s * decode_s) / Z.
  // `prompt` already carries the window weights (they are applied while capturing).
  std::vector<float> fuse(const std::vector<float>& prompt, const std::vector<const std::vector<float>*>& decode,
                          int64_t n) const;
};

}  // namespace deferkv
