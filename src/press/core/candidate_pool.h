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

// The default of the parameter pool: one constant, so that the measurements of issue 45
// change it in one place.
inline constexpr const char* kDefaultCandidatePool = "all";

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

// The parameter pool, with kDefaultCandidatePool.
PressParameter candidate_pool_parameter();
// Reads pool where the method declares it; refuses a pool without a deferred trigger.
CandidatePool read_candidate_pool(const PressParams& params, bool deferred);

}  // namespace deferkv
