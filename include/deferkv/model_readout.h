#pragma once
// The part of a model a press may read when it scores cache entries by their effect on
// the model's output (behavior_preserving): the attention output projections, the final
// RMSNorm and the LM head. Presses never see the model itself; a press that needs this
// asks its host for it (PressHost::read_model_output). Matrices come out
// dequantised to float32 on demand, a few rows at a time where that is all a press needs
// (the LM head is never dequantised whole).
#include <cstdint>
#include <vector>

namespace deferkv {

class ModelReadout {
 public:
  virtual ~ModelReadout() = default;

  virtual int64_t n_embd() const = 0;   // D: width of the residual stream
  virtual int64_t n_vocab() const = 0;  // V

  // The final RMSNorm n(x) = gamma * x / sqrt(mean(x^2) + eps): gamma [n_embd] and eps.
  virtual const std::vector<float>& final_norm_weight() const = 0;
  virtual float final_norm_eps() const = 0;

  // logits = W_U n(x) [n_vocab] of a final residual x [n_embd] (the input of the final
  // norm), computed as the forward pass computes them.
  virtual void logits(const float* residual, float* out) const = 0;

  // Rows of the LM head W_U (the token embedding when the model ties them) for the n
  // given tokens: out [n x n_embd]. Fails on a token outside the vocabulary.
  virtual void lm_head_rows(const int32_t* tokens, int64_t n, float* out) const = 0;

  // The attention output projection W_O of `layer`: out [n_embd x n_head * head_dim],
  // row-major; columns h*head_dim .. (h+1)*head_dim - 1 are query head h's D x d block.
  virtual void attention_output(int64_t layer, float* out) const = 0;
};

}  // namespace deferkv
