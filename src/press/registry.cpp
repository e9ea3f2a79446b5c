#include "press/registry.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "deferkv/error.h"
#include "press/core/composed_press.h"

namespace deferkv {
namespace {

const std::vector<PressMethod>& methods() {
  static const std::vector<PressMethod> all = {
      full_method(),   streaming_llm_method(), h2o_method(),   tova_method(),    knorm_method(),
      expected_attention_method(), snapkv_method(), pyramidkv_method(), adakv_method(), chunkkv_method(),
      deferkv_method(), moment_kv_method(), laq_method(), laqpp_method(), speckv_method(), compresskv_method(),
      lookaheadkv_method(),
      behavior_preserving_method(),
  };
  return all;
}

}  // namespace

PressRole prompt_press_role(const PressParams&) { return {}; }

KvBudget KvBudget::per_head(int64_t entries) {
  if (entries <= 0) {
    fail("the KV budget must be a positive number of entries per head, got {} (press 'full' keeps every entry)",
         entries);
  }
  KvBudget b;
  b.per_head_ = entries;
  return b;
}

KvBudget KvBudget::ratio(double compression_ratio) {
  if (!(compression_ratio >= 0.0 && compression_ratio < 1.0)) {
    fail("the KV compression ratio must be in [0, 1), got {}", compression_ratio);
  }
  KvBudget b;
  b.ratio_ = compression_ratio;
  return b;
}

int64_t KvBudget::resolve(int64_t prompt_tokens) const {
  if (!is_ratio()) return per_head_;
  return static_cast<int64_t>(static_cast<double>(prompt_tokens) * (1.0 - ratio_));
}

std::string KvBudget::describe() const {
  if (!is_set()) return "no budget";
  return is_ratio() ? fmt::format("ratio {}", ratio_) : fmt::format("{} per head", per_head_);
}

const std::vector<PressInfo>& press_catalogue() {
  static const std::vector<PressInfo> infos = [] {
    std::vector<PressInfo> out;
    for (const auto& m : methods()) out.push_back(m.info);
    return out;
  }();
  return infos;
}

namespace {

RolePress make_one_press(const std::string& spec, const KvBudget& budget) {
  const size_t colon = spec.find(':');
  const std::string name = spec.substr(0, colon);
  for (const auto& m : methods()) {
    if (m.info.name != name) continue;
    if (m.info.uses_budget && !budget.is_set()) {
      fail("press '{}' needs a KV budget (--kv-budget or --kv-ratio)", name);
    }
    const PressParams params(m.info, colon == std::string::npos ? "" : spec.substr(colon + 1));
    return {m.make(params, budget), m.role(params)};
  }
  std::string known;
  for (const auto& m : methods()) known += (known.empty() ? "" : ", ") + m.info.name;
  fail("unknown press '{}' (known: {})", name, known);
}

}  // namespace

std::unique_ptr<Press> make_press(const std::string& spec, const KvBudget& budget) {
  std::vector<RolePress> parts;
  size_t begin = 0;
  for (;;) {
    const size_t end = spec.find('+', begin);
    parts.push_back(make_one_press(spec.substr(begin, end - begin), budget));
    if (end == std::string::npos) break;
    begin = end + 1;
  }
  return compose_presses(std::move(parts));
}

}  // namespace deferkv
