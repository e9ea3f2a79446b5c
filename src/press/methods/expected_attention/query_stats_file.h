#pragma once
// Expected Attention's query statistics computed offline (kvpress
// ExpectedAttentionStatsPress): per layer and query head the mean and covariance of the
// pre-RoPE queries over a calibration set, in a safetensors file (or the folder holding
// model.safetensors, as the hub publishes them) with tensors query_mean [layers, heads,
// head_dim] and query_cov [layers, heads, head_dim, head_dim], heads the query heads.
#include <cstdint>
#include <string>
#include <vector>

#include "deferkv/press.h"
#include "press/core/trained_tensors.h"

namespace deferkv {

class QueryStatsFile {
 public:
  // Reads and checks the file; errors name it and the tensor at fault.
  static QueryStatsFile load(const std::string& path, HeadDimOrder order);

  // Fails, naming the first mismatch, unless the statistics are for a model of this shape.
  void check_fits(const PressModelShape& shape) const;

  int64_t n_head() const { return mean_.shape[1]; }
  // mu and Sigma (row-major) of query head h of a layer, in the model's dimension order.
  std::vector<double> mean(int64_t layer, int64_t h, bool interleaved_rope) const;
  std::vector<double> covariance(int64_t layer, int64_t h, bool interleaved_rope) const;

 private:
  std::string path_;
  HeadDimOrder order_ = HeadDimOrder::kHuggingFace;
  TrainedTensor mean_, cov_;
};

}  // namespace deferkv
