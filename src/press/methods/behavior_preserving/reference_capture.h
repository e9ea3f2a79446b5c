#pragma once
// The reference positions of output-aware scoring [docs/methods/behavior_preserving.md]: the newest m
// positions the model has read (the prompt's tail after a prefill, the latest generated
// tokens during decoding), with what the estimator needs of each: its queries in every
// layer (after RoPE, as the attention read them) and its final residual (the input of
// the final RMSNorm). Fed by the attention and residual taps; positions read again (a
// rollback) replace the old ones.
#include <cstdint>
#include <map>
#include <vector>

namespace deferkv {

struct AttentionEvent;
struct ResidualEvent;

struct ReferencePosition {
  int32_t position;
  std::vector<float> residual;              // [n_embd]
  std::vector<std::vector<float>> queries;  // [layer][n_head * head_dim]
};

class ReferenceCapture {
 public:
  explicit ReferenceCapture(int64_t m) : m_(m) {}

  void add_queries(const AttentionEvent& event);
  void add_residuals(const ResidualEvent& event);

  // The captured positions (oldest first) that have a residual and the queries of all
  // n_layer layers.
  std::vector<const ReferencePosition*> complete(int64_t n_layer) const;

 private:
  ReferencePosition& entry(int32_t position);
  void forget_from(int32_t position);
  void keep_newest();

  int64_t m_;
  std::map<int32_t, ReferencePosition> captured_;
};

}  // namespace deferkv
