// LagKV [docs/methods/lagkv.md]: query-free. After `sinks` entries, each KV head's entries
// are cut into partitions of `lag`; the next partition is the lag reference of the one
// before it: each channel of a key (and of a value) is min-max normalised by the
// reference's range over its entries, and an entry scores the spread (standard deviation
// over its channels) of its normalised key and value, softmaxed within its partition. An
// entry that stands out against what follows it is kept. The last whole partition and the
// remainder after it have no reference and are kept (score 1), as are the sinks (the
// selection's protected first entries). Default: each entry's score is its rank within its
// partition over `lag`, so every partition keeps about as many; cross_scoring=true compares
// the softmaxed scores across partitions instead.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "kv/kv_cache.h"
#include "press/core/scored_press.h"

namespace deferkv {
namespace {

struct LagParameters {
  int64_t sinks = 4;
  int64_t lag = 128;
  bool cross_scoring = false;
};

// Per entry of rows [first, first + n_parts * lag): the softmax within its partition of
// the standard deviation over channels of the row normalised by the next partition's
// per-channel range. The last partition [first + n_parts * lag, + lag) is only a reference.
std::vector<double> lag_relative_scores(KvRowReader& rows, int64_t first, int64_t n_parts, int64_t lag, int64_t d) {
  std::vector<double> out;
  out.reserve(static_cast<size_t>(n_parts * lag));
  std::vector<double> lo(static_cast<size_t>(d)), hi(static_cast<size_t>(d)), spread(static_cast<size_t>(lag));
  for (int64_t p = 0; p < n_parts; ++p) {
    const int64_t part = first + p * lag, ref = part + lag;
    std::fill(lo.begin(), lo.end(), INFINITY);
    std::fill(hi.begin(), hi.end(), -INFINITY);
    for (int64_t j = ref; j < ref + lag; ++j) {
      const float* x = rows(j);
      for (int64_t c = 0; c < d; ++c) {
        lo[c] = std::min(lo[c], double(x[c]));
        hi[c] = std::max(hi[c], double(x[c]));
      }
    }
    for (int64_t j = 0; j < lag; ++j) {
      const float* x = rows(part + j);
      double sum = 0, sum_sq = 0;
      for (int64_t c = 0; c < d; ++c) {
        // A channel the reference holds constant carries nothing: 0 (kvpress divides by 0).
        const double range = hi[c] - lo[c];
        const double y = range > 0 ? (x[c] - lo[c]) / range : 0.0;
        sum += y;
        sum_sq += y * y;
      }
      // Unbiased (d - 1), as torch.std.
      const double mean = sum / double(d);
      spread[j] = d > 1 ? std::sqrt(std::max(0.0, (sum_sq - double(d) * mean * mean) / double(d - 1))) : 0.0;
    }
    const double top = *std::max_element(spread.begin(), spread.end());
    double z = 0;
    for (double s : spread) z += std::exp(s - top);
    for (double s : spread) out.push_back(std::exp(s - top) / z);
  }
  return out;
}

class LagKvPress final : public ScoredPress {
 public:
  LagKvPress(const PressParams& params, const KvBudget& budget, ScoredParts parts, LagParameters lag)
      : ScoredPress(params, budget, std::move(parts)), lag_(lag) {}

 protected:
  // One score per entry the head holds (the selection reads the first C): the partitions
  // run over every entry, the protected window included, so that its entries serve as
  // the last scored partition's reference.
  std::vector<std::vector<float>> score(const LayerEviction& layer) override {
    std::vector<std::vector<float>> scores(static_cast<size_t>(layer.n_head_kv()));
    const int64_t d = layer.cache.head_dim(), lag = lag_.lag;
    for (int64_t g = 0; g < layer.n_head_kv(); ++g) {
      const int64_t n = layer.cache.length(layer.layer, g);
      const int64_t sinks = std::min(lag_.sinks, n);
      std::vector<float>& s = scores[g];
      s.assign(static_cast<size_t>(n), 1.0f);  // sinks and the unreferenced tail
      if (n < lag_.sinks + 2 * lag) {
        // Too short for a partition and its reference: the newest entries win (kvpress).
        for (int64_t j = sinks; j < n; ++j) s[j] = static_cast<float>(double(j - sinks) / double(n - sinks));
        continue;
      }
      // Partitions [sinks + p * lag, + lag) for p < n_parts, each referenced by the next.
      const int64_t n_parts = (n - sinks) / lag - 1;
      KvRowReader key(layer.cache.keys(layer.layer, g));
      KvRowReader value(layer.cache.values(layer.layer, g));
      const std::vector<double> k = lag_relative_scores(key, sinks, n_parts, lag, d);
      const std::vector<double> v = lag_relative_scores(value, sinks, n_parts, lag, d);
      std::vector<double> both(k.size());
      for (size_t i = 0; i < k.size(); ++i) both[i] = (k[i] + v[i]) / 2;
      if (lag_.cross_scoring) {
        for (size_t i = 0; i < both.size(); ++i) s[sinks + i] = static_cast<float>(both[i]);
        continue;
      }
      // Rank within the partition (0: the smallest; ties to the earlier entry) over lag.
      std::vector<int64_t> order(static_cast<size_t>(lag));
      for (int64_t p = 0; p < n_parts; ++p) {
        const double* part = both.data() + p * lag;
        std::iota(order.begin(), order.end(), 0);
        std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return part[a] < part[b]; });
        for (int64_t r = 0; r < lag; ++r) {
          s[sinks + p * lag + order[r]] = static_cast<float>(double(r) / double(lag));
        }
      }
    }
    return scores;
  }

 private:
  LagParameters lag_;
};

}  // namespace

PressMethod lagkv_method() {
  return {{"lagkv", "query-free: each partition's keys and values against the next's range, top-k per KV head",
           "LagKV, arXiv 2504.04704",
           with_shared_parameters({{"sinks", "4", "first entries always kept"},
                                   {"lag", "128", "partition size: the next partition is the reference of the one before"},
                                   {"cross_scoring", "false",
                                    "compare the softmaxed scores across partitions, not each entry's rank within its own"}}, {.pieces = true})},
          [](const PressParams& p, const KvBudget& b) -> std::unique_ptr<Press> {
            ScoredParts parts = read_scored_parts(p);
            LagParameters lag;
            lag.sinks = p.get_int("sinks", 0, 1 << 20);
            lag.lag = p.get_int("lag", 1, 1 << 20);
            lag.cross_scoring = p.get_bool("cross_scoring");
            parts.selection.sinks = lag.sinks;
            return std::make_unique<LagKvPress>(p, b, std::move(parts), lag);
          },
          scored_press_role};
}

}  // namespace deferkv
