#include "press/registry.h"

#include <algorithm>
#include <cmath>
#include <mutex>

#include <fmt/format.h>

#include "deferkv/error.h"
#include "press/core/composed_press.h"

namespace deferkv {
namespace {

// Every method, by what it reads (PressReads): the groups `deferkv presses` shows.
const std::vector<PressMethod>& methods() {
  static const std::vector<PressMethod> all = [] {
    std::vector<PressMethod> out;
    const auto group = [&](PressReads reads, std::initializer_list<PressMethod (*)()> members) {
      for (PressMethod (*method)() : members) {
        out.push_back(method());
        out.back().info.reads = reads;
      }
    };
    group(PressReads::kNothing, {full_method, streaming_llm_method, random_method});
    group(PressReads::kKeysAndValues, {knorm_method, keydiff_method, lagkv_method, leverage_method, cur_method});
    group(PressReads::kPromptQueries, {snapkv_method, pyramidkv_method, adakv_method, chunkkv_method, h2o_method,
                                       expected_attention_method, behavior_preserving_method, non_causal_attention_method,
                                       compactor_method, criticalkv_method, finch_method, simlayerkv_method,
                                       duo_attention_method});
    group(PressReads::kDecodeQueries, {deferkv_method, tova_method, moment_kv_method});
    group(PressReads::kExtraForward, {laq_method, laqpp_method, speckv_method, lookaheadkv_method, kvzip_method});
    group(PressReads::kCalibration, {compresskv_method, qfilter_method});
    return out;
  }();
  return all;
}

}  // namespace

PressRole prompt_press_role(const PressParams&) { return {}; }

const char* press_reads_name(PressReads reads) {
  switch (reads) {
    case PressReads::kUnstated: return "unstated";
    case PressReads::kNothing: return "nothing";
    case PressReads::kKeysAndValues: return "keys_and_values";
    case PressReads::kPromptQueries: return "prompt_queries";
    case PressReads::kDecodeQueries: return "decode_queries";
    case PressReads::kExtraForward: return "extra_forward";
    case PressReads::kCalibration: return "calibration";
  }
  return "";
}

const char* press_reads_heading(PressReads reads) {
  switch (reads) {
    case PressReads::kUnstated: return "not stated";
    case PressReads::kNothing: return "position or chance alone";
    case PressReads::kKeysAndValues: return "the cached keys and values, no query (the same with or without the question)";
    case PressReads::kPromptQueries: return "the prompt's queries (question-aware when the question ends the prompt)";
    case PressReads::kDecodeQueries: return "the queries of the answer's first tokens, or of every step";
    case PressReads::kExtraForward: return "a forward pass of their own after the prompt";
    case PressReads::kCalibration: return "a profile or weights made for the model beforehand";
  }
  return "";
}

const char* extra_forward_name(ExtraForward extra) {
  switch (extra) {
    case ExtraForward::kNone: return "";
    case ExtraForward::kLookahead: return "lookahead";
    case ExtraForward::kDraft: return "draft";
    case ExtraForward::kRows: return "rows";
    case ExtraForward::kReconstruction: return "context reconstruction";
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

// The methods added while the program runs (add_press_method). Each is shared, so that a
// press being made from one keeps it while another thread replaces it.
std::mutex added_mutex;
std::vector<std::shared_ptr<const PressMethod>>& added_methods() {
  static std::vector<std::shared_ptr<const PressMethod>> added;
  return added;
}

std::shared_ptr<const PressMethod> find_method(const std::string& name) {
  for (const auto& m : methods()) {
    if (m.info.name == name) return {std::shared_ptr<const PressMethod>(), &m};  // static: not owned
  }
  std::lock_guard lock(added_mutex);
  for (const auto& m : added_methods()) {
    if (m->info.name == name) return m;
  }
  return nullptr;
}

// The method of one press spec "name[:params]" and its parameters (which refer to the
// method's PressInfo: the method is held as long as they are).
struct SpecMethod {
  std::shared_ptr<const PressMethod> method;
  PressParams params;
};

SpecMethod method_of(const std::string& spec) {
  const size_t colon = spec.find(':');
  const std::string name = spec.substr(0, colon);
  if (std::shared_ptr<const PressMethod> m = find_method(name)) {
    return {m, PressParams(m->info, colon == std::string::npos ? "" : spec.substr(colon + 1))};
  }
  std::string known;
  for (const auto& m : methods()) known += (known.empty() ? "" : ", ") + m.info.name;
  std::lock_guard lock(added_mutex);
  for (const auto& m : added_methods()) known += ", " + m->info.name;
  fail("unknown press '{}' (known: {})", name, known);
}

RolePress make_one_press(const std::string& spec, const KvBudget& budget) {
  const SpecMethod found = method_of(spec);
  const PressMethod& m = *found.method;
  if (m.info.uses_budget && !budget.is_set()) {
    fail("press '{}' needs a KV budget: kv_budget (entries per KV head) or kv_ratio", m.info.name);
  }
  return {m.make(found.params, budget), m.role(found.params)};
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
    const SpecMethod found = method_of(part);
    const PressRole role = found.method->role(found.params);
    if ((role.evicts_prompt || role.evicts_generated) && !role.evicts_at_prefill_end_only) return true;
  }
  return false;
}

bool press_resumes_deferred(const std::string& spec) {
  const std::vector<std::string> parts = press_parts(spec);
  if (parts.size() != 1) return false;  // a composition's other part holds state of its own
  const SpecMethod found = method_of(parts[0]);
  return found.method->role(found.params).resumes_deferred;
}

void Press::resume_deferred(const DeferredEviction&) {
  fail("press '{}' holds no deferred eviction to resume: a deferred compressed context is made with deferkv",
       describe());
}

void add_press_method(PressMethod method) {
  const std::string& name = method.info.name;
  if (name.empty() || name.find_first_of(":,=+@ \t\n") != std::string::npos) {
    fail("a press name must be non-empty, without ':', ',', '=', '+', '@' or spaces (a spec's separators), got '{}'",
         name);
  }
  for (const auto& m : methods()) {
    if (m.info.name == name) fail("'{}' is a built-in press: give the added method another name", name);
  }
  std::shared_ptr<const PressMethod> added = std::make_shared<const PressMethod>(std::move(method));
  std::lock_guard lock(added_mutex);
  for (auto& m : added_methods()) {
    // The method replaced is freed after the lock (in `added`), as clear_added_press_methods frees.
    if (m->info.name == added->info.name) {
      std::swap(m, added);
      return;
    }
  }
  added_methods().push_back(std::move(added));
}

void clear_added_press_methods() {
  std::vector<std::shared_ptr<const PressMethod>> forgotten;
  {
    std::lock_guard lock(added_mutex);
    forgotten.swap(added_methods());
  }  // freed outside the lock: a method's state may take locks of its own (Python's GIL)
}

namespace {
bool some_part_runs(const std::string& spec, ExtraForward forward) {
  for (const std::string& part : press_parts(spec)) {
    const SpecMethod found = method_of(part);
    if (found.method->role(found.params).extra_forward == forward) return true;
  }
  return false;
}
}  // namespace

bool press_needs_draft_model(const std::string& spec) { return some_part_runs(spec, ExtraForward::kDraft); }

bool press_runs_learned_rows(const std::string& spec) { return some_part_runs(spec, ExtraForward::kRows); }

}  // namespace deferkv
