#include "press/core/pooling.h"

#include <algorithm>

#include "deferkv/error.h"

namespace deferkv {

namespace {

// Each pooling with the name a parameter gives it: parse_pooling and pooling_name read one table.
struct PoolingName {
  Pooling pooling;
  const char* name;
};
constexpr PoolingName kPoolingNames[] = {{Pooling::kNone, "none"}, {Pooling::kMax, "max"}, {Pooling::kAvg, "avg"}};

}  // namespace

Pooling parse_pooling(const std::string& name) {
  for (const PoolingName& p : kPoolingNames) {
    if (name == p.name) return p.pooling;
  }
  fail("unknown pooling '{}' (known: none, max, avg)", name);
}

const char* pooling_name(Pooling pooling) {
  for (const PoolingName& p : kPoolingNames) {
    if (pooling == p.pooling) return p.name;
  }
  fail("internal: pooling {} has no name", static_cast<int>(pooling));
}

std::vector<float> pool_scores(const std::vector<float>& scores, Pooling pooling, int64_t kernel) {
  if (pooling == Pooling::kNone || kernel <= 1) return scores;
  if (kernel % 2 == 0) fail("the pooling kernel must be odd, got {}", kernel);
  const auto n = static_cast<int64_t>(scores.size());
  const int64_t half = kernel / 2;
  std::vector<float> out(scores.size());
  for (int64_t j = 0; j < n; ++j) {
    const int64_t lo = std::max<int64_t>(0, j - half), hi = std::min(n - 1, j + half);
    if (pooling == Pooling::kMax) {
      out[j] = *std::max_element(scores.begin() + lo, scores.begin() + hi + 1);
    } else {
      double sum = 0;
      for (int64_t i = lo; i <= hi; ++i) sum += scores[i];
      out[j] = static_cast<float>(sum / static_cast<double>(kernel));
    }
  }
  return out;
}

}  // namespace deferkv
