#include "press/core/prompt_pieces.h"

#include <algorithm>

#include "deferkv/error.h"
#include "kv/kv_cache.h"
#include "press/core/scored_press.h"
#include "press/core/selection.h"

namespace deferkv {

std::vector<PressParameter> piece_parameters() {
  return {
      {"block", "0",
       "pieces: score the prompt B candidates at a time, each time the kept ones and the next block, keeping the "
       "budget (kvpress's BlockPress; 0: the whole prompt at once)"},
      {"segment", "0",
       "pieces: each run of S candidates keeps its own share of the ratio, scored on its own (kvpress's ChunkPress; "
       "not chunk=, a selection unit; 0: the whole prompt at once)"},
  };
}

PromptPieces read_prompt_pieces(const PressParams& params) {
  PromptPieces pieces;
  const int64_t block = params.has("block") ? params.get_int("block", 0, 1 << 24) : 0;
  const int64_t segment = params.has("segment") ? params.get_int("segment", 0, 1 << 24) : 0;
  if (block > 0 && segment > 0) {
    fail("press '{}': block={} and segment={} both cut the prompt into pieces: choose one", params.name(), block,
         segment);
  }
  if (block > 0) pieces = {PromptPieces::Kind::kBlocks, block};
  if (segment > 0) pieces = {PromptPieces::Kind::kSegments, segment};
  return pieces;
}

namespace {

// A cache of `from`'s shape that holds in `layer`, per head g, the sinks [0, sinks[g]) of
// from's head and then its entries at piece[g] (their stored bytes and positions); every
// other layer is empty. The scratch is restored in place, one piece after the other.
void hold_piece(const KvCache& from, int64_t layer, const std::vector<int64_t>& sinks,
                const std::vector<std::vector<int32_t>>& piece, KvCache& scratch) {
  KvCache::Snapshot s;
  s.types = from.types();
  s.head_dim = from.head_dim();
  for (int64_t l = 0; l < from.n_layer(); ++l) {
    for (int64_t g = 0; g < from.n_head_kv(); ++g) {
      s.lengths.push_back(0);
      s.keys.emplace_back();
      s.values.emplace_back();
      s.positions.emplace_back();
      s.key_shifts.emplace_back();
      if (l != layer) continue;
      const KvHeadView v = from.view(l, g);
      const float* shift = v.keys.coding.shift;  // the rows are encoded with it
      if (shift != nullptr) s.key_shifts.back().assign(shift, shift + s.head_dim);
      const auto add = [&](int64_t j) {
        s.keys.back().insert(s.keys.back().end(), v.keys.row(j), v.keys.row(j) + v.keys.row_bytes());
        s.values.back().insert(s.values.back().end(), v.values.row(j), v.values.row(j) + v.values.row_bytes());
        s.positions.back().push_back(v.positions[j]);
        ++s.lengths.back();
      };
      for (int64_t j = 0; j < sinks[g]; ++j) add(j);
      for (int32_t j : piece[g]) add(j);
    }
  }
  scratch.restore(s);
}

// The scorer's scores of each head's piece (after its sinks) in the scratch cache.
std::vector<std::vector<float>> score_piece(const LayerEviction& eviction, const std::vector<int64_t>& sinks,
                                            const std::vector<std::vector<int32_t>>& piece, KvCache& scratch,
                                            const PieceScorer& score) {
  hold_piece(eviction.cache, eviction.layer, sinks, piece, scratch);
  std::vector<int64_t> candidates;
  for (size_t g = 0; g < piece.size(); ++g) candidates.push_back(sinks[g] + static_cast<int64_t>(piece[g].size()));
  const LayerEviction view{eviction.layer,  eviction.n_layer, eviction.prompt_end, eviction.next_position,
                           eviction.budget, 0,                std::move(candidates), eviction.prompt_attention,
                           eviction.decode_attention, scratch};
  std::vector<std::vector<float>> scores = score(view);
  for (size_t g = 0; g < piece.size(); ++g) {
    const int64_t c = view.candidates[g];
    if (static_cast<int64_t>(scores[g].size()) < c) fail("internal: {} scores for {} candidates", scores[g].size(), c);
    scores[g].erase(scores[g].begin(), scores[g].begin() + sinks[g]);
    scores[g].resize(piece[g].size());
  }
  return scores;
}

// The entries of `piece` at `indices` (ascending).
std::vector<int32_t> piece_entries(const std::vector<int32_t>& piece, const std::vector<int32_t>& indices) {
  std::vector<int32_t> out;
  out.reserve(indices.size());
  for (int32_t i : indices) out.push_back(piece[static_cast<size_t>(i)]);
  return out;
}

}  // namespace

std::vector<std::vector<int32_t>> dropped_by_pieces(const PromptPieces& pieces, const LayerEviction& eviction,
                                                    const std::vector<int64_t>& sinks, int64_t room,
                                                    double compression_ratio, const PieceScorer& score) {
  const size_t heads = eviction.candidates.size();
  const bool blocks = pieces.kind == PromptPieces::Kind::kBlocks;
  if (pieces.kind == PromptPieces::Kind::kWhole) fail("internal: an eviction by pieces with no pieces");
  // Per head: the candidates kept so far, and where the next piece starts. Segments run
  // from the head's first candidate, so the first one holds the sinks and counts them in
  // its share (kvpress's first chunk keeps its sinks within its share, its scorer scoring
  // them high); blocks start after the first `room` candidates past the sinks, as kvpress
  // starts from the first n_kept entries.
  std::vector<std::vector<int32_t>> kept(heads);
  std::vector<int64_t> next(heads, 0);
  int64_t longest = 1;
  for (size_t g = 0; g < heads; ++g) {
    if (blocks) {
      const int64_t first = std::min(room, eviction.candidates[g] - sinks[g]);
      kept[g] = index_range(sinks[g], sinks[g] + first);
      next[g] = sinks[g] + first;
    }
    longest = std::max(longest, sinks[g] + (blocks ? room : 0) + pieces.size);
  }
  KvCache scratch(eviction.cache.n_layer(), eviction.cache.n_head_kv(), eviction.cache.head_dim(), longest,
                  eviction.cache.types());
  for (;;) {
    std::vector<std::vector<int32_t>> piece(heads);
    std::vector<int64_t> keep(heads, 0);  // how many of its piece each head keeps
    bool more = false;
    for (size_t g = 0; g < heads; ++g) {
      const int64_t begin = next[g], end = std::min(next[g] + pieces.size, eviction.candidates[g]);
      if (begin >= end) continue;  // this head is done; its piece stays empty
      more = true;
      next[g] = end;
      if (blocks) {
        piece[g] = merge_indices(kept[g], index_range(begin, end));
        keep[g] = room;
      } else {
        const int64_t n = end - begin, sinks_in = std::clamp<int64_t>(sinks[g] - begin, 0, n);
        const auto n_kept = static_cast<int64_t>(static_cast<double>(n) * (1.0 - compression_ratio));
        const int64_t share = std::max<int64_t>(1, n_kept);
        piece[g] = index_range(begin + sinks_in, end);
        keep[g] = std::max<int64_t>(0, share - sinks_in);
      }
    }
    if (!more) break;
    if (std::all_of(piece.begin(), piece.end(), [](const auto& p) { return p.empty(); })) continue;  // sinks only
    const std::vector<std::vector<float>> scores = score_piece(eviction, sinks, piece, scratch, score);
    for (size_t g = 0; g < heads; ++g) {
      if (piece[g].empty()) continue;
      const std::vector<int32_t> best = piece_entries(piece[g], top_k(scores[g], keep[g]));
      kept[g] = blocks ? best : merge_indices(kept[g], best);
    }
  }
  std::vector<std::vector<int32_t>> dropped(heads);
  for (size_t g = 0; g < heads; ++g) {
    size_t k = 0;
    for (int64_t j = sinks[g]; j < eviction.candidates[g]; ++j) {
      if (k < kept[g].size() && kept[g][k] == j) {
        ++k;
      } else {
        dropped[g].push_back(static_cast<int32_t>(j));
      }
    }
  }
  return dropped;
}

}  // namespace deferkv
