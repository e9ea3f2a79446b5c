#pragma once
// The task generators' random numbers: a 64-bit Mersenne Twister with draws written out
// here rather than taken from <random>'s distributions (whose results differ between
// standard libraries), so one seed gives the same samples on every platform.
#include <cstdint>
#include <random>
#include <string_view>
#include <utility>
#include <vector>

namespace deferkv::eval {

class Rng {
 public:
  explicit Rng(uint64_t seed) : engine_(seed) {}

  // Uniform in [lo, hi], both included, without modulo bias.
  int64_t uniform(int64_t lo, int64_t hi);
  // k distinct values of [0, n) in the order drawn (Python's random.sample of a range).
  std::vector<int64_t> sample(int64_t n, int64_t k);
  // 64 random bits.
  uint64_t bits() { return engine_(); }

  template <typename T>
  void shuffle(std::vector<T>& items) {
    for (int64_t i = static_cast<int64_t>(items.size()) - 1; i > 0; --i) {
      std::swap(items[static_cast<size_t>(i)], items[static_cast<size_t>(uniform(0, i))]);
    }
  }
  template <typename T>
  const T& choice(const std::vector<T>& items) {
    return items[static_cast<size_t>(uniform(0, static_cast<int64_t>(items.size()) - 1))];
  }

 private:
  std::mt19937_64 engine_;
};

// The seed of one sample, from the run's seed and the sample's task, length and number,
// so a sample does not depend on which other samples a run makes.
uint64_t sample_seed(uint64_t run_seed, std::string_view task, int64_t length, int64_t index);

}  // namespace deferkv::eval
