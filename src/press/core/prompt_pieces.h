#pragma once
// A scorer applied to pieces of the prompt rather than to the whole of it
// [docs/methods/blocks_and_segments.md]: kvpress's BlockPress and ChunkPress, as the
// parameters block= and segment= of the scorers that score keys and values alone.
//
//  - blocks (block=B): the candidates are taken B at a time, as a streaming prefill would
//    hand them over; after each block the scorer scores the entries kept so far plus the
//    new block and keeps the budget's share of them, so each choice sees only the blocks
//    so far. The first choice starts from the first `room` candidates, as kvpress's.
//  - segments (segment=S): each run of S consecutive candidates is scored on its own and
//    keeps max(1, int(n (1 - r))) of its n entries, r the run's compression ratio:
//    independent budgets per segment (FINCH's chunks, as kvpress runs them).
//
// A piece is scored as if it were the whole head: the scorer sees a scratch cache whose
// layer holds, per head, the sinks and the piece's entries (their stored bytes, so nothing
// is rounded again), and nothing else. So only a scorer whose score reads the entries it
// is given (keys, values, their positions) can take pieces; one reading the prompt's
// queries or attention would score every piece with queries that saw the whole prompt,
// which is not what kvpress's wrappers do (their scorers recompute the queries from the
// piece's hidden states, which deferkv does not keep). Such methods do not declare the
// parameters (SharedDefaults::pieces), and PressParams names why when one is given.
//
// [OUR FORMULATION] The method's sinks are kept unscored and every piece is scored with
// them in front (where LagKV and CUR expect them); the first segment counts them in its
// share. kvpress's scorers score their sinks high within each piece instead.
//
// [OUR FORMULATION] kvpress computes the whole prompt in one forward pass and then
// compresses block by block (its BlockPress says so: not a true chunked prefill); so does
// this. The eviction runs at each layer's prompt end like every scorer's, so the peak is
// the same: one layer's whole prompt beside the others' budgets (what the batch engine
// reserves for it); a prefill evicting between blocks would hold about b + B per head but
// would change the later blocks' keys.
#include <cstdint>
#include <functional>
#include <vector>

#include "deferkv/press.h"
#include "press/core/press_params.h"

namespace deferkv {

class KvCache;
struct LayerEviction;

struct PromptPieces {
  enum class Kind { kWhole, kBlocks, kSegments };
  Kind kind = Kind::kWhole;
  int64_t size = 0;  // B or S
};

// The parameters block and segment (0: the whole prompt at once).
std::vector<PressParameter> piece_parameters();
// Reads them where the method declares them; both at once are refused.
PromptPieces read_prompt_pieces(const PressParams& params);

// The scorer, asked about one piece per head (layer.candidates[g] entries of the scratch
// layer, the sinks first).
using PieceScorer = std::function<std::vector<std::vector<float>>(const LayerEviction&)>;

// One layer's eviction by pieces. Per head g the candidates are [0, candidates[g]) of the
// cache's layer; the first sinks[g] are kept; of the rest, blocks keep `room` (the budget
// less the window and sinks) and segments keep their ratio's share of each. Returns per
// head the candidates dropped, ascending. `eviction` is the layer's view (its fields other
// than the cache and candidates are handed to the scorer as they are).
std::vector<std::vector<int32_t>> dropped_by_pieces(const PromptPieces& pieces, const LayerEviction& eviction,
                                                    const std::vector<int64_t>& sinks, int64_t room,
                                                    double compression_ratio, const PieceScorer& score);

}  // namespace deferkv
