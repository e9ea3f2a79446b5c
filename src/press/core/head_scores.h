#pragma once
// One layer's candidate scores per KV head, as views into the scorer's vectors: the
// allocation and the selection read them in place, so an eviction that drops a few
// entries of long heads copies nothing per head.
#include <span>
#include <vector>

namespace deferkv {

using HeadScores = std::vector<std::span<const float>>;

// Every vector whole.
inline HeadScores head_scores(const std::vector<std::vector<float>>& scores) {
  return HeadScores(scores.begin(), scores.end());
}

}  // namespace deferkv
