// Random [docs/methods/random.md]: the baseline every scorer should beat. Each entry's score
// is a uniform draw, so each KV head keeps b entries chosen at random; kvpress's
// RandomPress. The draws are seeded, so a run's kept sets are reproducible.
#include <random>

#include "press/core/scored_press.h"

namespace deferkv {
namespace {

class RandomPress final : public ScoredPress {
 public:
  RandomPress(const PressParams& params, const KvBudget& budget, ScoredParts parts, int64_t seed)
      : ScoredPress(params, budget, std::move(parts)), seed_(seed) {}

 protected:
  // One stream per (seed, layer, KV head, eviction): mt19937_64 and seed_seq are fully
  // specified by the standard, so the draws are the same on every platform and in the
  // reference test. The eviction enters by next_position, so a trigger that fires again
  // draws afresh. [OUR FORMULATION] kvpress reseeds torch's generator on every call, which
  // gives every layer the same draws; separate streams keep layers independent.
  std::vector<std::vector<float>> score(const LayerEviction& layer) override {
    std::vector<std::vector<float>> scores(static_cast<size_t>(layer.n_head_kv()));
    for (int64_t g = 0; g < layer.n_head_kv(); ++g) {
      std::seed_seq seq{static_cast<uint32_t>(seed_), static_cast<uint32_t>(layer.layer), static_cast<uint32_t>(g),
                        static_cast<uint32_t>(layer.next_position)};
      std::mt19937_64 draws(seq);
      // The top 53 bits as a double in [0, 1), then float: a float tie is broken by position.
      for (int64_t j = 0; j < layer.candidates[g]; ++j) {
        scores[g].push_back(static_cast<float>(static_cast<double>(draws() >> 11) * 0x1.0p-53));
      }
    }
    return scores;
  }

 private:
  int64_t seed_;
};

}  // namespace

PressMethod random_method() {
  return {{"random", "keep b entries drawn at random (seeded), per KV head, at prefill end: the baseline",
           "kvpress RandomPress (NVIDIA/kvpress)",
           with_shared_parameters({{"seed", "0", "seeds the draws; the same seed keeps the same entries"}}, {.pieces = true})},
          [](const PressParams& p, const KvBudget& b) -> std::unique_ptr<Press> {
            const int64_t seed = p.get_int("seed", 0, 0xFFFFFFFFLL);
            return std::make_unique<RandomPress>(p, b, read_scored_parts(p), seed);
          },
          scored_press_role};
}

}  // namespace deferkv
