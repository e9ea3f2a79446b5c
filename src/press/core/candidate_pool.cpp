#include "press/core/candidate_pool.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "deferkv/error.h"

namespace deferkv {

CandidatePool CandidatePool::parse(const std::string& text, const std::string& press) {
  if (text == "all") return all();
  const bool multiple = !text.empty() && text.back() == 'x';
  const std::string number = multiple ? text.substr(0, text.size() - 1) : text;
  const auto refuse = [&] {
    fail("press '{}': pool={} is not a pool: give all, a multiple of the budget of at least 1 (e.g. pool=4x) or a "
         "count of entries per KV head of at least the budget (e.g. pool=512)",
         press, text);
  };
  if (number.empty() || number.find_first_not_of("0123456789.") != std::string::npos) refuse();
  char* end = nullptr;
  errno = 0;
  const double value = std::strtod(number.c_str(), &end);
  if (errno != 0 || end != number.c_str() + number.size() || !std::isfinite(value)) refuse();
  if (multiple) {
    if (value < 1.0 || value > 1e6) refuse();
    return CandidatePool(Kind::kMultiple, value);
  }
  if (value != std::floor(value) || value < 1 || value > 1e9) refuse();
  return CandidatePool(Kind::kCount, value);
}

int64_t CandidatePool::entries(int64_t budget_entries, const std::string& press) const {
  switch (kind_) {
    case Kind::kAll: return -1;
    case Kind::kMultiple: return static_cast<int64_t>(std::ceil(value_ * static_cast<double>(budget_entries)));
    case Kind::kCount: {
      const auto n = static_cast<int64_t>(value_);
      if (n < budget_entries) {
        fail("press '{}': pool={} is below the budget of {} entries per KV head: the choice at step d could not "
             "fill it (give pool >= the budget, a multiple such as pool=4x, or pool=all)",
             press, n, budget_entries);
      }
      return n;
    }
  }
  return -1;
}

PressParameter candidate_pool_parameter(const std::string& default_value) {
  return {"pool", default_value,
          "with d > 0: cut each layer inside the prefill to a candidate pool of P entries per KV head, chosen by the "
          "prompt's scores (all | <m>x the budget | <n> entries); step d chooses the budget from it"};
}

CandidatePool read_candidate_pool(const PressParams& params, bool deferred) {
  if (!params.has("pool")) return CandidatePool::all();
  const CandidatePool pool = CandidatePool::parse(params.get_string("pool"), params.name());
  if (!pool.keeps_all() && !deferred) {
    fail("press '{}': pool={} cuts the prompt to candidates for an eviction at decode step d; it needs d > 0 (not "
         "the prefill's end, per_step or every)",
         params.name(), params.get_string("pool"));
  }
  return pool;
}

}  // namespace deferkv
