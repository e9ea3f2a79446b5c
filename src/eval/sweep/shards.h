#pragma once
// Which rows of the flattened grid a shard runs.
#include <cstdint>
#include <vector>

#include "deferkv/eval_sweep.h"

namespace deferkv::eval {

// The shard (1-based) of each row, given each row's cost (its length in tokens) in run order.
// Rows are dealt out longest first, one to each shard in turn, the turn moving on by one
// shard each round: every shard gets ⌊g/N⌋ or about ⌈g/N⌉ of the g rows of each length, so
// each gets a fair mix of long and short ones, and, with methods innermost in run order, no
// shard gets all of one method's rows. Deterministic: the same grid gives the same slices.
std::vector<int64_t> shard_of_rows(const std::vector<int64_t>& costs, int64_t shard_count);

}  // namespace deferkv::eval
