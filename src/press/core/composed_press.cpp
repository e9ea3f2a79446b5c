#include "press/core/composed_press.h"

#include <string_view>

#include "deferkv/error.h"

namespace deferkv {
namespace {

class ComposedPress final : public Press {
 public:
  explicit ComposedPress(std::vector<std::unique_ptr<Press>> parts) : parts_(std::move(parts)) {}

  void on_attach(const PressModelShape& shape, PressHost& host) override {
    for (auto& p : parts_) p->on_attach(shape, host);
  }
  void on_prompt_question(int64_t n_tokens) override {
    for (auto& p : parts_) p->on_prompt_question(n_tokens);
  }
  void on_prefill_begin(int64_t first_position, int64_t n_tokens) override {
    for (auto& p : parts_) p->on_prefill_begin(first_position, n_tokens);
  }
  void on_attention(const AttentionEvent& event) override {
    for (auto& p : parts_) p->on_attention(event);
  }
  // A part may act on the layer now only if every part before it is done with it, so that
  // the parts' prefill-end work on each layer keeps the composition's order; after a part
  // that keeps the layer whole, the later ones wait for on_prefill_end with it.
  bool on_prefill_layer_end(KvCache& cache, int64_t layer) override {
    for (auto& p : parts_) {
      if (!p->on_prefill_layer_end(cache, layer)) return false;
    }
    return true;
  }
  // Every layer is evicted at its end when each part takes the layers (none keeps them
  // whole, which would stop the calls for every later layer) and one of them evicts.
  PrefillLayerEnd prefill_layer_end() const override {
    bool evicts = false;
    for (const auto& p : parts_) {
      const PrefillLayerEnd part = p->prefill_layer_end();
      if (part == PrefillLayerEnd::kKeepsLayers) return part;
      evicts = evicts || part == PrefillLayerEnd::kEvictsLayers;
    }
    return evicts ? PrefillLayerEnd::kEvictsLayers : PrefillLayerEnd::kPassesLayers;
  }
  void on_prefill_end(KvCache& cache) override {
    for (auto& p : parts_) p->on_prefill_end(cache);
  }
  // As on_prefill_layer_end: a part acts on the layer now only if every part before it
  // has, so each layer still meets the parts in the composition's order.
  bool on_decode_layer_end(KvCache& cache, int64_t layer, int64_t step) override {
    for (auto& p : parts_) {
      if (!p->on_decode_layer_end(cache, layer, step)) return false;
    }
    return true;
  }
  void on_decode_step(KvCache& cache, int64_t step) override {
    for (auto& p : parts_) p->on_decode_step(cache, step);
  }
  void on_question(int64_t first_position, int64_t n_tokens) override {
    for (auto& p : parts_) p->on_question(first_position, n_tokens);
  }
  std::string describe() const override {
    std::string out;
    for (const auto& p : parts_) out += (out.empty() ? "" : "+") + p->describe();
    return out;
  }

 private:
  std::vector<std::unique_ptr<Press>> parts_;
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
