#include "press/registry.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "deferkv/error.h"

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

KvBudget KvBudget::per_head(int64_t entries) {
  if (entries <= 0) fail("the KV budget must be a positive number of entries per head, got {}", entries);
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

std::unique_ptr<Press> make_one_press(const std::string& spec, const KvBudget& budget) {
  const size_t colon = spec.find(':');
  const std::string name = spec.substr(0, colon);
  for (const auto& m : methods()) {
    if (m.info.name != name) continue;
    if (m.info.uses_budget && !budget.is_set()) {
      fail("press '{}' needs a KV budget (--kv-budget or --kv-ratio)", name);
    }
    return m.make(PressParams(m.info, colon == std::string::npos ? "" : spec.substr(colon + 1)), budget);
  }
  std::string known;
  for (const auto& m : methods()) known += (known.empty() ? "" : ", ") + m.info.name;
  fail("unknown press '{}' (known: {})", name, known);
}

// Several presses in turn: every hook goes to each, in the order given.
class ComposedPress final : public Press {
 public:
  explicit ComposedPress(std::vector<std::unique_ptr<Press>> parts) : parts_(std::move(parts)) {}

  void on_attach(const PressModelShape& shape) override {
    for (auto& p : parts_) p->on_attach(shape);
  }
  void on_prefill_begin(int64_t first_position, int64_t n_tokens) override {
    for (auto& p : parts_) p->on_prefill_begin(first_position, n_tokens);
  }
  void on_attention(const AttentionEvent& event) override {
    for (auto& p : parts_) p->on_attention(event);
  }
  void on_prefill_end(KvCache& cache) override {
    for (auto& p : parts_) p->on_prefill_end(cache);
  }
  void on_decode_step(KvCache& cache, int64_t step) override {
    for (auto& p : parts_) p->on_decode_step(cache, step);
  }
  // Every part sees the rows' attention; one part at most may ask for them.
  const LookaheadRows* lookahead_rows() const override {
    const LookaheadRows* rows = nullptr;
    for (const auto& p : parts_) {
      const LookaheadRows* own = p->lookahead_rows();
      if (own != nullptr && rows != nullptr) fail("'{}': only one press of a composition can feed lookahead rows", describe());
      if (own != nullptr) rows = own;
    }
    return rows;
  }
  bool needs_model_readout() const override {
    return std::any_of(parts_.begin(), parts_.end(), [](const auto& p) { return p->needs_model_readout(); });
  }
  void on_model_readout(const ModelReadout& readout) override {
    for (auto& p : parts_) p->on_model_readout(readout);
  }
  void on_final_residual(const ResidualEvent& event) override {
    for (auto& p : parts_) p->on_final_residual(event);
  }
  std::string describe() const override {
    std::string out;
    for (const auto& p : parts_) out += (out.empty() ? "" : "+") + p->describe();
    return out;
  }

 private:
  std::vector<std::unique_ptr<Press>> parts_;
};

}  // namespace

std::unique_ptr<Press> make_press(const std::string& spec, const KvBudget& budget) {
  std::vector<std::unique_ptr<Press>> parts;
  size_t begin = 0;
  for (;;) {
    const size_t end = spec.find('+', begin);
    parts.push_back(make_one_press(spec.substr(begin, end - begin), budget));
    if (end == std::string::npos) break;
    begin = end + 1;
  }
  if (parts.size() == 1) return std::move(parts.front());
  return std::make_unique<ComposedPress>(std::move(parts));
}

}  // namespace deferkv
