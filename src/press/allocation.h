#pragma once
// Budget allocators: how many evictable entries each layer (PyramidKV) or each KV head
// of a layer (AdaKV) keeps, given the average `base` = b - w per head.
#include <cstdint>
#include <vector>

namespace deferkv {

// Rounds non-negative real shares to integers whose sum is exactly `total` (largest
// remainder first; ties to the lower index).
std::vector<int64_t> round_preserving_sum(const std::vector<double>& shares, int64_t total);

// PyramidKV [docs/methods/pyramidkv.md]: budgets fall linearly from layer 0 to the top layer,
// from max = 2*base - min to min = base / beta (integer division, as the reference),
// with max capped at the n_candidates that exist. The reference floors the step and so
// keeps up to ~5% more than L*base; here the real-valued pyramid is rounded so the
// layers together keep exactly L*base (the budget is never exceeded).
std::vector<int64_t> pyramid_layer_budgets(int64_t base, int64_t n_candidates, int64_t n_layer,
                                           int64_t beta);

// AdaKV [docs/methods/adakv.md]: the G*base best scores of the layer's heads (each head's
// vector scored on one scale) decide how many entries n_g each head wins; head g gets
// n_g*(1 - alpha) + int(base*alpha). The reference rounds each head on its own, which
// can exceed G*base by up to G/2; here the rounding keeps the layer's sum exact.
std::vector<int64_t> adakv_head_budgets(const std::vector<std::vector<float>>& scores, int64_t base,
                                        double alpha);

// CompressKV [docs/methods/compresskv.md]: layer l gets floor + round(u_l * (b*L - floor*L)), with u
// the layers' offline error scores (summing to 1), clipped to [floor, cap]; then the
// sum is repaired to exactly b*L, adding one to layers in descending u or removing one
// in ascending u, within the bounds.
std::vector<int64_t> error_aware_layer_budgets(const std::vector<double>& u, int64_t b, int64_t floor, int64_t cap);

}  // namespace deferkv
