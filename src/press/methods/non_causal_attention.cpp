// Non-causal attention [docs/methods/non_causal_attention.md] (kvpress NonCausalAttnPress,
// the attention half of Compactor, arXiv 2507.08143): an entry the prompt's own queries
// attend to, from before and after it, is likely to be read again. The prompt is cut into
// chunks of chunk_size; in each, every query attends to every key of the chunk (no causal
// mask), the probabilities are summed over the queries, averaged over each KV head's query
// heads, weighted by ||v_j||, average-pooled over 3 neighbours and z-normalised over the
// layer. Each KV head keeps its best b at the end of the prefill.
#include "observe/attention_tap.h"
#include "press/core/scored_press.h"
#include "press/methods/compactor/leverage_scores.h"
#include "press/methods/compactor/non_causal_attention.h"

namespace deferkv {
namespace {

class NonCausalAttentionPress final : public ScoredPress {
 public:
  NonCausalAttentionPress(const PressParams& params, const KvBudget& budget, ScoredParts parts, int64_t chunk)
      : ScoredPress(params, budget, std::move(parts)), chunks_(chunk) {}

  void act(const PressAt& at, KvCache& cache) override {
    ScoredPress::act(at, cache);
    if (at.point == PressPoint::kPromptBegin) chunks_.begin(at.first_position, at.first_position + at.n_tokens);
  }

  // The queries come from the forward pass: the shared capture is causal (non_causal_attention.h).
  void on_attention(const AttentionEvent& event) override {
    ScoredPress::on_attention(event);
    if (will_evict()) chunks_.add(event);
  }

 protected:
  // [OUR FORMULATION] an entry of an earlier prompt of the session (kept by its eviction)
  // is in no chunk of this prompt and has attention 0; kvpress scores one prompt at a time.
  std::vector<std::vector<float>> score(const LayerEviction& layer) override {
    std::vector<std::vector<double>> scores;
    for (int64_t g = 0; g < layer.n_head_kv(); ++g) {
      scores.push_back(chunks_.scores(layer.cache, layer.layer, g, 0, layer.candidates[g]));
    }
    z_normalise_layer(scores);
    std::vector<std::vector<float>> out;
    for (const auto& head : scores) out.emplace_back(head.begin(), head.end());
    return out;
  }

 private:
  NonCausalChunks chunks_;
};

}  // namespace

PressMethod non_causal_attention_method() {
  // Prefill only, as kvpress: the scores need every prompt query, which no decode step has.
  return {{"non_causal_attention",
           "keep the entries the prompt's chunks attend to most without a causal mask, per KV head, at prefill end",
           "Chari & Van Durme (Compactor), arXiv 2507.08143; kvpress NonCausalAttnPress",
           with_shared_parameters({{"chunk_size", "256", "prompt tokens per chunk of non-causal attention"}},
                                  {.triggers = false})},
          [](const PressParams& p, const KvBudget& b) -> std::unique_ptr<Press> {
            return std::make_unique<NonCausalAttentionPress>(p, b, read_scored_parts(p),
                                                             p.get_int("chunk_size", 1, 1 << 20));
          },
          scored_press_role};
}

}  // namespace deferkv
