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
      full_method(),        streaming_llm_method(), h2o_method(),          tova_method(),
      knorm_method(),       keydiff_method(),       random_method(),       expected_attention_method(),
      snapkv_method(),      pyramidkv_method(),     adakv_method(),        chunkkv_method(),
      deferkv_method(),     moment_kv_method(),     laq_method(),          laqpp_method(),
      speckv_method(),      compresskv_method(),    lookaheadkv_method(),  behavior_preserving_method(),
      lagkv_method(),
  };
  return all;
}

}  // namespace

PressRole prompt_press_role(const PressParams&) { return {}; }

const char* extra_forward_name(ExtraForward extra) {
  switch (extra) {
    case ExtraForward::kNone: return "";
    case ExtraForward::kLookahead: return "lookahead";
    case ExtraForward::kDraft: return "draft";
    case ExtraForward::kRows: return "rows";
  }
  return "";
}

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

// The method of one press spec "name[:params]" and its parameters.
std::pair<const PressMethod*, PressParams> method_of(const std::string& spec) {
  const size_t colon = spec.find(':');
  const std::string name = spec.substr(0, colon);
  for (const auto& m : methods()) {
    if (m.info.name == name) return {&m, PressParams(m.info, colon == std::string::npos ? "" : spec.substr(colon + 1))};
  }
  std::string known;
  for (const auto& m : methods()) known += (known.empty() ? "" : ", ") + m.info.name;
  fail("unknown press '{}' (known: {})", name, known);
}

RolePress make_one_press(const std::string& spec, const KvBudget& budget) {
  const auto [m, params] = method_of(spec);
  if (m->info.uses_budget && !budget.is_set()) {
    fail("press '{}' needs a KV budget: kv_budget (entries per KV head) or kv_ratio", m->info.name);
  }
  return {m->make(params, budget), m->role(params)};
}

// The parts of "a+b+c".
std::vector<std::string> press_parts(const std::string& spec) {
  std::vector<std::string> parts;
  size_t begin = 0;
  for (;;) {
    const size_t end = spec.find('+', begin);
    parts.push_back(spec.substr(begin, end - begin));
    if (parts.back().empty()) fail("press '{}' has an empty part: a composition is written a+b", spec);
    if (end == std::string::npos) return parts;
    begin = end + 1;
  }
}

}  // namespace

std::unique_ptr<Press> make_press(const std::string& spec, const KvBudget& budget) {
  std::vector<RolePress> parts;
  for (const std::string& part : press_parts(spec)) parts.push_back(make_one_press(part, budget));
  return compose_presses(std::move(parts));
}

bool press_evicts_after_prefill(const std::string& spec) {
  for (const std::string& part : press_parts(spec)) {
    const auto [m, params] = method_of(part);
    const PressRole role = m->role(params);
    if ((role.evicts_prompt || role.evicts_generated) && !role.evicts_at_prefill_end_only) return true;
  }
  return false;
}

bool press_needs_draft_model(const std::string& spec) {
  for (const std::string& part : press_parts(spec)) {
    const auto [m, params] = method_of(part);
    if (m->role(params).extra_forward == ExtraForward::kDraft) return true;
  }
  return false;
}

}  // namespace deferkv
