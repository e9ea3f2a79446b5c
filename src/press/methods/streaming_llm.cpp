// StreamingLLM [docs/methods/streaming_llm.md]: keep the first `sinks` tokens (attention sinks) and
// the most recent ones; original positions are kept unless rerotate=true (the kept entries
// renumbered 0..n-1, their keys re-rotated: docs/methods/key_rerotation.md). The score is recency;
// the sinks are the selection's protected first entries.
// per_step=false (default; the one-shot form the compression papers run): at the end
// of the prefill each head keeps the first `sinks` prompt tokens and the last b - sinks.
// per_step=true (the streaming original, as a sliding window): after the prefill and
// every decode step (every=n: every n-th) each head keeps its first `sinks` entries and
// its newest b - sinks, generated tokens included.
#include "press/core/scored_press.h"

namespace deferkv {
namespace {

class StreamingLlmPress final : public ScoredPress {
 public:
  using ScoredPress::ScoredPress;

 protected:
  // Newer entries score higher (entries are ordered by position).
  std::vector<std::vector<float>> score(const LayerEviction& layer) override {
    std::vector<std::vector<float>> scores(static_cast<size_t>(layer.n_head_kv()));
    for (int64_t g = 0; g < layer.n_head_kv(); ++g) {
      scores[g].resize(static_cast<size_t>(layer.candidates[g]));
      // Each from its own index (exact below 2^24), not a running sum, so it vectorises.
      for (size_t j = 0; j < scores[g].size(); ++j) scores[g][j] = static_cast<float>(j);
    }
    return scores;
  }
};

}  // namespace

PressMethod streaming_llm_method() {
  return {{"streaming_llm", "attention sinks plus the most recent tokens", "StreamingLLM, arXiv 2309.17453",
           with_shared_parameters({{"sinks", "4", "first tokens always kept"}, rerotation_parameter()}, {.pieces = true})},
          [](const PressParams& p, const KvBudget& b) -> std::unique_ptr<Press> {
            ScoredParts parts = read_scored_parts(p);
            parts.selection.sinks = p.get_int("sinks", 0, 1 << 20);
            return std::make_unique<StreamingLlmPress>(p, b, std::move(parts));
          },
          position_matched_press_role};
}

}  // namespace deferkv
