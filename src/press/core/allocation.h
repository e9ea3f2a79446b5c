#pragma once
// Allocation: how many candidates each (layer, KV head) keeps, given the average `base`
// per head [docs/methods/README.md, "Allocation"]. Any scorer takes any rule, chosen by
// the parameter alloc: uniform (SnapKV), pyramid (PyramidKV), adakv (AdaKV),
// ada_pyramid (the pyramid's layer budget shared among the heads as AdaKV does),
// calibrated (CompressKV's error-aware layer budgets from a calibration profile) or
// per_layer (kvpress's PerLayerCompressionPress: a compression ratio per layer).
// [OUR FORMULATION] ada_pyramid's composition, and calibrated budgets under another
// method's scores: the papers pair each rule with one scorer.
#include <cstdint>
#include <string>
#include <vector>

#include "deferkv/press.h"
#include "press/core/head_scores.h"
#include "press/core/press_params.h"

namespace deferkv {

enum class AllocationKind { kUniform, kPyramid, kAdaKv, kAdaPyramid, kCalibrated, kPerLayer };

// PyramidKV's layer budgets: `exact` rounds the real-valued pyramid so the layers keep
// exactly the total; `reference` floors the step as the reference code does, which can
// keep more than the total.
enum class PyramidRounding { kExact, kReference };

struct AllocationRule {
  AllocationKind kind = AllocationKind::kUniform;
  PyramidRounding rounding = PyramidRounding::kExact;
  int64_t beta = 20;                 // pyramid steepness
  double alpha = 0.2;                // AdaKV's per-head floor
  std::vector<double> layer_scores;  // calibrated: the profile's error score u_l per layer
  std::vector<double> layer_ratios;  // per_layer: the compression ratio r_l of each layer
  int64_t skip_layers = 0;           // layers below this index keep every candidate (KNorm's)
};

// What allocation sees of one layer.
struct LayerShare {
  int64_t layer;
  int64_t n_layer;
  int64_t base;      // candidates kept per head on average: b minus the protected entries
  int64_t budget;    // b: entries per head, protected ones included
  int64_t reserved;  // the protected entries per head counted in b (window, sinks)
  std::vector<int64_t> candidates;  // per KV head
  // The candidates per head the pyramid is shaped on: the prompt's (before any cut), so that
  // a deferred eviction from a candidate pool, whose layers hold pyramids of the pool's size,
  // gives each layer the share it would have had from the whole prompt. 0: the fewest of
  // `candidates` (per-step evictions, whose candidates are the cache's).
  int64_t pyramid_candidates = 0;
};

// How a method's parameters name its allocation: alloc=uniform | pyramid | adakv |
// ada_pyramid | calibrated (every scorer), or, as DeferKV does, by its base method:
// base=snapkv | pyramidkv | adakv | ada_pyramidkv | calibrated, for the same rules.
enum class AllocationKey { kAlloc, kBase };

// The parameters alloc or base (with its default), rounding, beta, alpha, profile and ratios.
std::vector<PressParameter> allocation_parameters(AllocationKey key, AllocationKind default_kind);
AllocationRule read_allocation(const PressParams& params, AllocationKey key);

// Per KV head of the layer: candidates to keep. `scores` are the heads' candidate scores
// (AdaKV ranks them together); every count is at most the head's candidates.
std::vector<int64_t> allocate(const AllocationRule& rule, const LayerShare& layer, const HeadScores& scores);

// Rounds non-negative real shares to integers whose sum is exactly `total` (largest
// remainder first; ties to the lower index).
std::vector<int64_t> round_preserving_sum(const std::vector<double>& shares, int64_t total);

// PyramidKV [docs/methods/pyramidkv.md]: budgets fall linearly from layer 0 to the top layer,
// from max = 2*base - min to min = base / beta (integer division, as the reference),
// with max capped at the n_candidates that exist. kExact rounds the real-valued pyramid
// so the layers together keep exactly L*min(base, C); kReference gives layer l
// max - l * ((max - min) // (L - 1)), as the reference code, which keeps up to ~5% more.
std::vector<int64_t> pyramid_layer_budgets(int64_t base, int64_t n_candidates, int64_t n_layer, int64_t beta,
                                           PyramidRounding rounding = PyramidRounding::kExact);

// AdaKV [docs/methods/adakv.md]: the G*base best scores of the layer's heads (each head's
// vector scored on one scale) decide how many entries n_g each head wins; head g gets
// n_g*(1 - alpha) + int(base*alpha). The reference rounds each head on its own, which
// can exceed G*base by up to G/2; here the rounding keeps the layer's sum exact.
std::vector<int64_t> adakv_head_budgets(const HeadScores& scores, int64_t base,
                                        double alpha);

// CompressKV [docs/methods/compresskv.md]: layer l gets floor + round(u_l * (b*L - floor*L)), with u
// the layers' offline error scores (summing to 1), clipped to [floor, cap]; then the
// sum is repaired to exactly b*L, adding one to layers in descending u or removing one
// in ascending u, within the bounds.
std::vector<int64_t> error_aware_layer_budgets(const std::vector<double>& u, int64_t b, int64_t floor, int64_t cap);

// kvpress's PerLayerCompressionPress: a head of `entries` (its candidates and the protected
// entries counted in b) keeps int(entries * (1 - ratio)) in all, the protected ones first:
// this many candidates, within [0, candidates].
int64_t per_layer_ratio_count(double ratio, int64_t candidates, int64_t reserved);

// Refuses, naming the press, a per_layer rule whose ratios are not one per layer of the model.
void check_layer_ratios(const AllocationRule& rule, int64_t n_layer, const std::string& description);

// CompressKV's bounds on a layer's budget b_l (window included): [min(32, b), 3b].
int64_t calibrated_floor(int64_t b);
int64_t calibrated_cap(int64_t b);

}  // namespace deferkv
