#pragma once
// Prompts of uniformly random token ids (seeded), for throughput benchmarks whose cost does
// not depend on the text: `bench-batch` runs them on the batch engine and `bench-serve
// --task random` sends the same ones to a server, so the two time the same work.
#include <cstdint>
#include <vector>

namespace deferkv::cli {

// `count` prompts of `length` ids in [0, n_vocab), drawn in turn from one mt19937(seed).
std::vector<std::vector<int32_t>> random_prompts(int64_t n_vocab, int64_t count, int64_t length, uint32_t seed = 42);

}  // namespace deferkv::cli
