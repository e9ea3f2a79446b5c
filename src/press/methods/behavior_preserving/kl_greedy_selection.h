#pragma once
// Which entries of one layer to delete [docs/methods/behavior_preserving.md, step 5]: a candidate pool of
// the entries whose deletion alone costs the least (second-order singleton KL), then a
// greedy on the exact marginal KL of the growing set (non-additive: the heads'
// renormalisations 1 - A and the softmax couple the members), a block at a time.
#include <cstdint>
#include <vector>

#include "press/methods/behavior_preserving/layer_deletion_model.h"

namespace deferkv {

class ThreadPool;

struct KlGreedyOptions {
  double pool_factor = 2.0;  // pool = pool_factor x the entries to delete (at least those)
  int64_t block = 64;        // most entries a KV head deletes per greedy iteration
  int64_t min_steps = 64;    // iterations at least, as far as the quota allows: the block is
                             // min(block, ceil(quota / min_steps)). A block's members are
                             // chosen without seeing each other, so a block that is a large
                             // share of the quota loses most of what the greedy gains.
  bool flexible = false;     // false: head g deletes exactly quota[g]; true: the layer
                             // deletes sum(quota), from whichever heads cost the least
};

// quota[g]: entries KV head g is over its budget (negative: under it). Fixed: head g
// loses quota[g] entries; flexible: the layer loses sum(quota); both clamped to what the
// candidates allow. Returns per KV head the deleted candidates, as indices into
// model.candidates(g), ascending.
std::vector<std::vector<int32_t>> choose_deletions(const LayerDeletionModel& model, const std::vector<int64_t>& quota,
                                                   const KlGreedyOptions& options, ThreadPool& pool);

}  // namespace deferkv
