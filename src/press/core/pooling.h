#pragma once
// 1-D pooling of a score vector along the token axis (stride 1, odd kernel k, padding
// k/2), with PyTorch's padding semantics, which the reference implementations inherit:
// max-pool ignores out-of-range positions; avg-pool pads with zeros and always divides
// by k (count_include_pad), so the first and last k/2 scores shrink.
#include <cstdint>
#include <string>
#include <vector>

namespace deferkv {

enum class Pooling { kNone, kMax, kAvg };

Pooling parse_pooling(const std::string& name);  // "none" | "max" | "avg"
const char* pooling_name(Pooling pooling);       // parse_pooling's inverse
std::vector<float> pool_scores(const std::vector<float>& scores, Pooling pooling, int64_t kernel);

}  // namespace deferkv
