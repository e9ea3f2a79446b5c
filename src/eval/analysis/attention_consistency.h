#pragma once
// The attention-consistency diagnostics of DeferKV's motivation [docs/evaluation.md]: how
// well the attention of one query position (a prompt position near the end, or an
// early decode step) predicts the attention of later decode steps. For each probe and
// each (layer, query head), the probe's attention row restricted to the prompt keys
// and renormalised is compared with the mean row of the reference steps: JSD similarity
// (1 - JSD, base 2) and top-B recall over the evictable keys [0, T - w).
#include <cstdint>
#include <string>
#include <vector>

#include "deferkv/session.h"

namespace deferkv::eval {

struct ConsistencyOptions {
  int64_t prompt_probes = 16;  // prompt positions T-k .. T-1
  int64_t decode_probes = 8;   // decode steps 1 .. S_probe
  int64_t reference_steps = 24;  // the later steps S_probe+1 .. S_probe+reference_steps
  int64_t budget = 128;        // b: recall uses B = b - window
  int64_t window = 32;
  double eta = 0.7;            // DeferKV's discount for the fused row
};

struct ConsistencyPoint {
  std::string probe;  // "-3" (prompt offset), "+1" (decode step), "window", "deferkv"
  double jsd_similarity = 0;
  double recall = 0;
};

struct ConsistencyReport {
  std::vector<ConsistencyPoint> points;  // prompt probes, decode probes, then the window variants
  int64_t prompt_tokens = 0;
  int64_t samples = 0;
  int64_t reference_rows = 0;  // decode steps that made the reference (fewer at end of generation)
};

// Jensen-Shannon divergence in bits (0 for equal distributions, 1 for disjoint ones).
double jsd_base2(const std::vector<double>& p, const std::vector<double>& q);
// |TopB(p) ∩ TopB(q)| / B over the first `candidates` entries.
double top_b_recall(const std::vector<double>& p, const std::vector<double>& q, int64_t candidates, int64_t b);

// Runs greedy generation on each prompt with the full cache and measures. Fails when a
// prompt is too short for the window and probes, or generation ends before any
// reference step.
ConsistencyReport measure_attention_consistency(Session& session, const std::vector<std::vector<int32_t>>& prompts,
                                                const ConsistencyOptions& options);

}  // namespace deferkv::eval
