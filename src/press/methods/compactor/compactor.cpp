// Compactor [docs/methods/compactor.md] (Chari & Van Durme, arXiv 2507.08143; kvpress
// CompactorPress): blends the two query-agnostic signals of leverage.cpp and
// non_causal_attention.cpp, each z-normalised over the layer,
//   score = blending * z(leverage) + z(non-causal attention),
// both computed on the prompt without its first sink_size_start and last sink_size_end
// tokens, which are always kept (the selection's sinks and the protected window).
// blending defaults to the compression ratio, as kvpress's.
#include <algorithm>

#include "kernels/rope.h"
#include "kv/kv_cache.h"
#include "observe/attention_tap.h"
#include "press/core/scored_press.h"
#include "press/methods/compactor/leverage_scores.h"
#include "press/methods/compactor/non_causal_attention.h"

namespace deferkv {
namespace {

struct CompactorOptions {
  int64_t sinks = 8, chunk = 256, sketch_dimension = 48, seed = 0;
  double blending = -1;  // < 0: the compression ratio
};

class CompactorPress final : public ScoredPress {
 public:
  CompactorPress(const PressParams& params, const KvBudget& budget, ScoredParts parts, int64_t window,
                 CompactorOptions options)
      : ScoredPress(params, budget, std::move(parts)), window_(window), o_(options), chunks_(options.chunk) {}

  // The chunks cover the prompt between the sinks and the window, as kvpress's slice.
  void act(const PressAt& at, KvCache& cache) override {
    ScoredPress::act(at, cache);
    if (at.point != PressPoint::kPromptBegin) return;
    prompt_tokens_ = at.n_tokens;
    chunks_.begin(std::max(at.first_position, o_.sinks), at.first_position + at.n_tokens - window_);
  }

  void on_attention(const AttentionEvent& event) override {
    if (rotary_.n_rot == 0) rotary_ = event.rotary;
    ScoredPress::on_attention(event);
    if (will_evict()) chunks_.add(event);
  }

 protected:
  // The sinks score 0: the selection keeps them.
  std::vector<std::vector<float>> score(const LayerEviction& layer) override {
    const int64_t d = layer.cache.head_dim();
    std::vector<std::vector<double>> geometry, attention;
    for (int64_t g = 0; g < layer.n_head_kv(); ++g) {
      const int64_t c = layer.candidates[g], from = std::min(o_.sinks, c);
      const auto sketch = gaussian_sketch({o_.seed, layer.layer, g, layer.next_position}, d, o_.sketch_dimension);
      geometry.push_back(leverage_scores(layer.cache, rotary_, layer.layer, g, from, c, sketch, o_.sketch_dimension));
      attention.push_back(chunks_.scores(layer.cache, layer.layer, g, from, c));
    }
    z_normalise_layer(geometry);
    z_normalise_layer(attention);
    const double blending = blending_weight();
    std::vector<std::vector<float>> scores;
    for (int64_t g = 0; g < layer.n_head_kv(); ++g) {
      const int64_t c = layer.candidates[g], from = std::min(o_.sinks, c);
      std::vector<float>& s = scores.emplace_back(static_cast<size_t>(c), 0.0f);
      for (int64_t j = from; j < c; ++j) {
        s[j] = static_cast<float>(blending * geometry[g][j - from] + attention[g][j - from]);
      }
    }
    return scores;
  }

 private:
  // [OUR FORMULATION] under a budget in entries (b per head), kvpress's default
  // blending = compression ratio is this prompt's, 1 - b / T.
  double blending_weight() const {
    if (o_.blending >= 0) return o_.blending;
    if (budget().is_ratio()) return budget().compression_ratio();
    return std::max(0.0, 1.0 - static_cast<double>(budget_entries()) / static_cast<double>(std::max<int64_t>(prompt_tokens_, 1)));
  }

  int64_t window_;
  CompactorOptions o_;
  NonCausalChunks chunks_;
  int64_t prompt_tokens_ = 0;
  Rotary rotary_;
};

}  // namespace

PressMethod compactor_method() {
  // Prefill only, as kvpress: the attention half needs every prompt query.
  return {{"compactor",
           "blend approximate key leverage with non-causal chunked attention (query-agnostic), per KV head, at prefill end",
           "Chari & Van Durme, arXiv 2507.08143; kvpress CompactorPress",
           with_shared_parameters(
               {{"sink_size_start", "8", "first tokens always kept"},
                {"sink_size_end", "4", "last prompt tokens always kept (the protected window)"},
                {"chunk_size", "256", "prompt tokens per chunk of non-causal attention"},
                {"sketch_dimension", "48", "columns of the Gaussian sketch of the keys"},
                {"blending", "auto", "weight of the leverage scores; auto: the compression ratio"},
                {"seed", "0", "seeds the sketch; the same seed keeps the same entries"}},
               {.triggers = false})},
          [](const PressParams& p, const KvBudget& b) -> std::unique_ptr<Press> {
            ScoredParts parts = read_scored_parts(p);
            CompactorOptions o;
            o.sinks = parts.selection.sinks = p.get_int("sink_size_start", 0, 1 << 20);
            parts.window = p.get_int("sink_size_end", 0, 1 << 20);
            o.chunk = p.get_int("chunk_size", 1, 1 << 20);
            o.sketch_dimension = p.get_int("sketch_dimension", 1, 4096);
            o.seed = p.get_int("seed", 0, 0xFFFFFFFFLL);
            if (p.get_string("blending") != "auto") o.blending = p.get_double("blending", 0.0, 1e6);
            const int64_t window = parts.window;
            return std::make_unique<CompactorPress>(p, b, std::move(parts), window, o);
          },
          scored_press_role};
}

}  // namespace deferkv
