#pragma once
// ModelReadout over a loaded model's weights (used in place, dequantised row by row).
#include "deferkv/model_config.h"
#include "deferkv/model_readout.h"
#include "model/model_weights.h"

namespace deferkv {

class ThreadPool;

class WeightsReadout final : public ModelReadout {
 public:
  // The config, weights and pool must outlive the readout.
  WeightsReadout(const ModelConfig& config, const ModelWeights& weights, ThreadPool& pool)
      : config_(config), weights_(weights), pool_(pool) {}

  int64_t n_embd() const override { return config_.n_embd; }
  int64_t n_vocab() const override { return weights_.output.rows; }
  const std::vector<float>& final_norm_weight() const override { return weights_.output_norm; }
  float final_norm_eps() const override { return config_.rms_eps; }
  void logits(const float* residual, float* out) const override;
  void lm_head_rows(const int32_t* tokens, int64_t n, float* out) const override;
  void attention_output(int64_t layer, float* out) const override;

 private:
  const ModelConfig& config_;
  const ModelWeights& weights_;
  ThreadPool& pool_;
};

}  // namespace deferkv
