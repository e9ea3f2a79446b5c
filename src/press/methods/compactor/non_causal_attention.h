#pragma once
// The attention half of Compactor [docs/methods/non_causal_attention.md], shared by the
// `non_causal_attention` and `compactor` methods: the prompt's span [begin, end) is cut into
// chunks of `chunk` positions from `begin` (the last may be shorter), and every query of a
// chunk attends to every key of its chunk, later ones included (non-causal): softmax over
// the chunk of q . k (kvpress does not scale by 1/sqrt(d)), summed over the chunk's queries
// and averaged over each KV head's query heads.
//
// Why the press reads the forward pass's queries itself: the shared capture
// (CaptureConfig, observe_attention) computes causal probabilities, a query seeing the keys
// up to its own position, and a chunk's early queries need the chunk's later keys, which a
// prefill batch may not hold yet. So each layer keeps the queries of its chunk not yet
// complete (at most `chunk` rows) and scores the chunk as soon as its last row has passed
// the layer; the sums per position are all that stays.
#include <cstdint>
#include <vector>

namespace deferkv {

struct AttentionEvent;
class KvCache;

class NonCausalChunks {
 public:
  explicit NonCausalChunks(int64_t chunk) : chunk_(chunk) {}

  // A prefill whose span [begin, end) is scored: forgets the previous one.
  void begin(int64_t begin, int64_t end);
  // Takes the event's rows in the span; scores each chunk whose rows are all in.
  void add(const AttentionEvent& event);
  // The sum for the entry at `position` of KV head g in `layer`; 0 outside the span (an
  // entry no chunk holds: an earlier prompt's, a generated one).
  double sum(int64_t layer, int64_t g, int64_t position) const;
  // kvpress's score of entries [from, to) of head g: sum(position) * ||v_j||, average-pooled
  // over 3 neighbours (zero-padded at both ends, always divided by 3). Returns to - from values.
  std::vector<double> scores(const KvCache& cache, int64_t layer, int64_t g, int64_t from, int64_t to) const;

 private:
  struct Layer {
    std::vector<float> pending;             // rows of the chunk under way, [row][n_head * d]
    int64_t pending_first = 0;              // position of its first row
    std::vector<std::vector<double>> sums;  // [g][position - begin]
  };
  void score_chunk(const AttentionEvent& event, Layer& layer, int64_t first, int64_t n) const;

  int64_t chunk_;
  int64_t begin_ = 0, end_ = 0;
  std::vector<Layer> layers_;
};

}  // namespace deferkv
