#include "press/core/composed_press.h"

#include <algorithm>
#include <string_view>

#include "deferkv/error.h"
#include "kv/kv_cache.h"

namespace deferkv {
namespace {

// The points of a composition: each part is called at the points it declared, in the
// parts' order. A part's layer ends come as each layer completes only while no part before
// it acts at the end of the prompt (or of the step): after one that does (LookaheadKV's rows,
// Behavior-Preserving's greedy over every layer), they wait for that end, so that each
// layer still meets the parts in the composition's order. A part that waits gets every
// layer then, in order, just before its own end: the same calls, later.
class ComposedPress final : public Press {
 public:
  explicit ComposedPress(std::vector<std::unique_ptr<Press>> parts) : parts_(std::move(parts)) {
    for (const auto& p : parts_) declared_.push_back(p->points());
    prompt_ = schedule(PressPoint::kPromptLayerEnd, PressPoint::kPromptEnd);
    decode_ = schedule(PressPoint::kDecodeLayerEnd, PressPoint::kDecodeStep);
    for (const PressPoints& d : declared_) {
      for (PressPoint p : {PressPoint::kPromptBegin, PressPoint::kQuestion}) {
        if (d.has(p)) points_ = points_.with(p);
      }
    }
  }

  void on_attach(const PressModelShape& shape, PressHost& host) override {
    for (auto& p : parts_) p->on_attach(shape, host);
  }
  PressPoints points() const override { return points_; }
  void on_attention(const AttentionEvent& event) override {
    for (auto& p : parts_) p->on_attention(event);
  }
  void act(const PressAt& at, KvCache& cache) override {
    switch (at.point) {
      case PressPoint::kPromptBegin:
      case PressPoint::kQuestion:
        for (size_t i = 0; i < parts_.size(); ++i) {
          if (declared_[i].has(at.point)) parts_[i]->act(at, cache);
        }
        return;
      case PressPoint::kPromptLayerEnd: return layer_end(prompt_, at, cache);
      case PressPoint::kPromptEnd: return end(prompt_, at, cache);
      case PressPoint::kDecodeLayerEnd: return layer_end(decode_, at, cache);
      case PressPoint::kDecodeStep: return end(decode_, at, cache);
    }
  }
  // The largest part's pool and kept entries: what the composition holds per head at most.
  PressHolding holding(const PressModelShape& shape, int64_t prompt_tokens) const override {
    PressHolding h;
    for (const auto& p : parts_) {
      const PressHolding part = p->holding(shape, prompt_tokens);
      h.pool = std::max(h.pool, part.pool);
      h.kept = std::max(h.kept, part.kept);
    }
    return h;
  }
  std::string describe() const override {
    std::string out;
    for (const auto& p : parts_) out += (out.empty() ? "" : "+") + p->describe();
    return out;
  }

 private:
  // A prompt's or a decode step's layer ends and end: parts [0, waiting) take their layer
  // ends as the layers complete; from `waiting` on (the first part acting at the end),
  // each part's layer ends and end run at the composition's end.
  struct Schedule {
    PressPoint layer_end, end;
    size_t waiting;
  };

  Schedule schedule(PressPoint layer_end, PressPoint end) {
    Schedule s{layer_end, end, parts_.size()};
    for (size_t i = 0; i < parts_.size(); ++i) {
      if (declared_[i].has(end)) {
        s.waiting = i;
        points_ = points_.with(end);
        break;
      }
      if (declared_[i].has(layer_end)) points_ = points_.with(layer_end);
    }
    return s;
  }

  void layer_end(const Schedule& s, const PressAt& at, KvCache& cache) {
    for (size_t i = 0; i < s.waiting; ++i) {
      if (declared_[i].has(s.layer_end)) parts_[i]->act(at, cache);
    }
  }

  void end(const Schedule& s, const PressAt& at, KvCache& cache) {
    for (size_t i = s.waiting; i < parts_.size(); ++i) {
      if (declared_[i].has(s.layer_end)) {
        PressAt layer = at;
        layer.point = s.layer_end;
        for (layer.layer = 0; layer.layer < cache.n_layer(); ++layer.layer) parts_[i]->act(layer, cache);
      }
      if (declared_[i].has(s.end)) parts_[i]->act(at, cache);
    }
  }

  std::vector<std::unique_ptr<Press>> parts_;
  std::vector<PressPoints> declared_;  // parts_[i]'s points, read once
  PressPoints points_;
  Schedule prompt_{}, decode_{};
};

const char* shared_region(const PressRole& a, const PressRole& b) {
  if (a.evicts_prompt && b.evicts_prompt) return "prompt";
  if (a.evicts_generated && b.evicts_generated) return "generated";
  return nullptr;
}

// `later` comes after `earlier` in the composition (the rules: make_press in press.h).
void check_pair(const RolePress& earlier, const RolePress& later) {
  const ExtraForward extra_a = earlier.role.extra_forward, extra_b = later.role.extra_forward;
  if (extra_a != ExtraForward::kNone && extra_b != ExtraForward::kNone) {
    fail("presses '{}' ({}) and '{}' ({}) cannot be composed: both run extra forward passes to score, and a "
         "prefill has room for one such protocol",
         earlier.press->describe(), extra_forward_name(extra_a), later.press->describe(), extra_forward_name(extra_b));
  }
  const char* shared = shared_region(earlier.role, later.role);
  if (shared == nullptr) return;
  const PressRole& e = earlier.role;
  const PressRole& l = later.role;
  const bool adds_region = (l.evicts_prompt && !e.evicts_prompt) || (l.evicts_generated && !e.evicts_generated);
  if (l.reads_the_cache_as_it_is && e.evicts_at_prefill_end_only && adds_region) return;
  const char* why = !l.reads_the_cache_as_it_is ? "the later one scores entries as it observed them"
                    : !e.evicts_at_prefill_end_only
                        ? "the earlier one scores entries as it observed them, and evicts after the later one has"
                        : "the later one would find them already cut to the budget, with nothing of its own to do";
  fail("presses '{}' and '{}' cannot be composed in this order: both evict the {} entries, and {}; compose a press "
       "of the prompt with one of the generated tokens (e.g. snapkv+moment_kv)",
       earlier.press->describe(), later.press->describe(), shared, why);
}

}  // namespace

std::unique_ptr<Press> compose_presses(std::vector<RolePress> parts) {
  for (size_t i = 0; i < parts.size(); ++i) {
    for (size_t j = i + 1; j < parts.size(); ++j) check_pair(parts[i], parts[j]);
  }
  if (parts.size() == 1) return std::move(parts.front().press);
  std::vector<std::unique_ptr<Press>> presses;
  for (auto& p : parts) presses.push_back(std::move(p.press));
  return std::make_unique<ComposedPress>(std::move(presses));
}

}  // namespace deferkv
