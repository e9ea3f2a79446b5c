// Leverage scores [docs/methods/leverage.md] (kvpress LeverageScorePress, the geometry half
// of Compactor, Chari & Van Durme, arXiv 2507.08143): keys that are statistical outliers of
// their head's key matrix carry information the others do not, so each KV head keeps the b
// entries of largest approximate leverage, diag(X (X^T X)^-1 X^T) of its centred pre-RoPE
// keys under a seeded right Gaussian sketch (X = (K - mean) Phi), z-normalised over the
// layer as kvpress does. No queries and no attention are read.
#include "kernels/rope.h"
#include "kv/kv_cache.h"
#include "observe/attention_tap.h"
#include "press/core/scored_press.h"
#include "press/methods/compactor/leverage_scores.h"

namespace deferkv {
namespace {

class LeveragePress final : public ScoredPress {
 public:
  LeveragePress(const PressParams& params, const KvBudget& budget, ScoredParts parts, int64_t sketch_dimension,
                int64_t seed)
      : ScoredPress(params, budget, std::move(parts)), sketch_dimension_(sketch_dimension), seed_(seed) {}

  // The model's RoPE, to undo it on the cached keys.
  void on_attention(const AttentionEvent& event) override {
    if (rotary_.n_rot == 0) rotary_ = event.rotary;
    ScoredPress::on_attention(event);
  }

 protected:
  // [OUR FORMULATION] kvpress recomputes the pre-RoPE keys from the layer's hidden states;
  // the cache holds keys after RoPE, so they are rotated back by their positions (equal up
  // to the cache's storage rounding). The sketch is seeded per (seed, layer, KV head,
  // eviction) as the random method's draws are; kvpress draws from torch's global generator.
  std::vector<std::vector<float>> score(const LayerEviction& layer) override {
    std::vector<std::vector<double>> scores;
    const int64_t d = layer.cache.head_dim();
    for (int64_t g = 0; g < layer.n_head_kv(); ++g) {
      const auto sketch = gaussian_sketch({seed_, layer.layer, g, layer.next_position}, d, sketch_dimension_);
      scores.push_back(
          leverage_scores(layer.cache, rotary_, layer.layer, g, 0, layer.candidates[g], sketch, sketch_dimension_));
    }
    z_normalise_layer(scores);
    std::vector<std::vector<float>> out;
    for (const auto& head : scores) out.emplace_back(head.begin(), head.end());
    return out;
  }

 private:
  int64_t sketch_dimension_, seed_;
  Rotary rotary_;
};

}  // namespace

PressMethod leverage_method() {
  return {{"leverage", "keep the keys of largest approximate leverage (sketched, pre-RoPE), per KV head, at prefill end",
           "Chari & Van Durme (Compactor), arXiv 2507.08143; kvpress LeverageScorePress",
           with_shared_parameters({{"sketch_dimension", "48", "columns of the Gaussian sketch of the keys"},
                                   {"seed", "0", "seeds the sketch; the same seed keeps the same entries"}}, {.pieces = true})},
          [](const PressParams& p, const KvBudget& b) -> std::unique_ptr<Press> {
            return std::make_unique<LeveragePress>(p, b, read_scored_parts(p), p.get_int("sketch_dimension", 1, 4096),
                                                   p.get_int("seed", 0, 0xFFFFFFFFLL));
          },
          scored_press_role};
}

}  // namespace deferkv
