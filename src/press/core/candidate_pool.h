#pragma once
// The candidate pool of a deferred eviction [docs/methods/deferkv.md, "Candidate pool"]
// [OUR FORMULATION]: a press whose eviction waits for decode step d (DeferKV, or any scorer
// with d > 0) would hold the whole prompt in every layer until then. With a pool, each
// layer is cut, as soon as the prompt has passed it (PressPoint::kPromptLayerEnd), to P
// entries per KV head chosen by the method's own scores at the prompt's end (for DeferKV:
// the prompt window's, SnapKV's) under the method's allocation at the pool's size; the
// sinks and the protected window are always in it. At step d the final budget is chosen
// from the pool as before. `all` keeps the whole prompt (the paper's behaviour).
#include <cstdint>
#include <string>

#include "deferkv/press.h"
#include "press/core/press_params.h"

namespace deferkv {

// DeferKV's default pool: twice the budget, from issue 45's measurements (bench/README.md,
// "DeferKV's candidate pool"): within about a point of `all` on the six RULER tasks at 4K,
// 1.26x SnapKV's peak KV at 4K (1.08x at 16K) against `all`'s 8.9x, and a server admits as
// many DeferKV requests as SnapKV ones under the same cap. The other scorers' default stays
// `all`: their d is 0 unless given, and a pool needs d > 0.
inline constexpr const char* kDefaultCandidatePool = "2x";

class CandidatePool {
 public:
  enum class Kind {
    kAll,       // no pool: the whole prompt waits for step d
    kMultiple,  // a multiple of the budget b (pool=4x)
    kCount,     // entries per KV head (pool=512)
  };

  static CandidatePool all() { return CandidatePool(Kind::kAll, 0); }
  // "all", "<m>x" (m >= 1, e.g. 4x or 2.5x) or "<n>" (n >= 1); anything else is refused,
  // naming the press and the value.
  static CandidatePool parse(const std::string& text, const std::string& press);

  Kind kind() const { return kind_; }
  bool keeps_all() const { return kind_ == Kind::kAll; }
  // Entries per KV head for a budget of b per head (window included); -1 for all. Fails,
  // naming the press, when a count is below b (the final choice could not fill its budget).
  int64_t entries(int64_t budget_entries, const std::string& press) const;

 private:
  CandidatePool(Kind kind, double value) : kind_(kind), value_(value) {}
  Kind kind_;
  double value_;  // the multiple, or the count
};

// The parameter pool with its default (kDefaultCandidatePool for DeferKV, "all" for the
// scorers whose trigger defaults to the prefill's end).
PressParameter candidate_pool_parameter(const std::string& default_value);
// Reads pool where the method declares it; refuses a pool without a deferred trigger.
CandidatePool read_candidate_pool(const PressParams& params, bool deferred);

}  // namespace deferkv
