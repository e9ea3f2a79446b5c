#include "random_prompts.h"

#include <random>

namespace deferkv::cli {

std::vector<std::vector<int32_t>> random_prompts(int64_t n_vocab, int64_t count, int64_t length, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> pick(0, static_cast<int32_t>(n_vocab - 1));
  std::vector<std::vector<int32_t>> prompts(static_cast<size_t>(count));
  for (auto& prompt : prompts) {
    prompt.resize(static_cast<size_t>(length));
    for (auto& t : prompt) t = pick(rng);
  }
  return prompts;
}

}  // namespace deferkv::cli
