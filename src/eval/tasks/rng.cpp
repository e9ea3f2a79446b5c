#include "eval/tasks/rng.h"

#include <numeric>
#include <unordered_set>

#include "deferkv/error.h"

namespace deferkv::eval {
namespace {

// splitmix64's finaliser: spreads every input bit over the output.
uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace

int64_t Rng::uniform(int64_t lo, int64_t hi) {
  if (lo > hi) fail("empty range [{}, {}] to draw from", lo, hi);
  const uint64_t span = static_cast<uint64_t>(hi - lo) + 1;  // 0 when the range is all of int64
  if (span == 0) return static_cast<int64_t>(engine_());
  // Reject the top partial copy of [0, span) so every value is equally likely.
  const uint64_t limit = UINT64_MAX - UINT64_MAX % span;
  uint64_t r;
  do r = engine_();
  while (r >= limit);
  return lo + static_cast<int64_t>(r % span);
}

std::vector<int64_t> Rng::sample(int64_t n, int64_t k) {
  if (k < 0 || k > n) fail("cannot draw {} distinct values out of {}", k, n);
  std::vector<int64_t> out;
  if (2 * k > n) {
    // Most of the range: a partial Fisher-Yates shuffle.
    std::vector<int64_t> all(static_cast<size_t>(n));
    std::iota(all.begin(), all.end(), int64_t{0});
    for (int64_t i = 0; i < k; ++i) std::swap(all[static_cast<size_t>(i)], all[static_cast<size_t>(uniform(i, n - 1))]);
    all.resize(static_cast<size_t>(k));
    return all;
  }
  // A few of many: draw and skip repeats.
  out.reserve(static_cast<size_t>(k));
  std::unordered_set<int64_t> taken;
  while (static_cast<int64_t>(out.size()) < k) {
    const int64_t v = uniform(0, n - 1);
    if (taken.insert(v).second) out.push_back(v);
  }
  return out;
}

uint64_t sample_seed(uint64_t run_seed, std::string_view task, int64_t length, int64_t index) {
  uint64_t h = mix(run_seed);
  for (unsigned char c : task) h = mix(h ^ c);
  h = mix(h ^ static_cast<uint64_t>(length));
  return mix(h ^ static_cast<uint64_t>(index));
}

}  // namespace deferkv::eval
