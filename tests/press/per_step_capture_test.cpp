// Per-step presses on the decode step's kept attention probabilities (AttentionEvent::probabilities)
// against the same presses computing every score themselves (the event passed on without
// them): the kept sets and the logits of every step must be the same, bit for bit, on
// every cache type. The wrapper also moves the press's layer ends to the end of the prompt
// and of the step (PressPoint), so the one run evicts each layer right after its attention
// and the other every layer at the end of the step: that must not change anything either. (The kept sets themselves are checked against the f64 reference in
// kept_set_reference_test.cpp.)
//
// Mutant applied, run, seen failing, reverted: ScoredPress does not end an eviction at its
// last layer's end (PressPoint::kDecodeLayerEnd)  -> this test, KeptSetReference.TovaPerStep,
// KNormPerStep, StreamingLLM, QuestionAgnostic.PerStepPressesCutTheQuestionLikeGeneratedTokens
// and the per-step SamePrefill* cases.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

#include "base/thread_pool.h"
#include "engine/session_internals.h"
#include "kv/kv_cache.h"
#include "observe/attention_tap.h"
#include "press/press_test_util.h"

namespace deferkv {
namespace {

// Forwards everything to `inner`, but hides the attention's kept probabilities from it, and
// gives it its layer ends only at the end of the prompt or the step, all in order.
class WithoutKeptScores final : public Press {
 public:
  explicit WithoutKeptScores(std::unique_ptr<Press> inner) : inner_(std::move(inner)) {}
  void on_attach(const PressModelShape& shape, PressHost& host) override { inner_->on_attach(shape, host); }
  PressPoints points() const override {
    PressPoints p = inner_->points();
    if (p.has(PressPoint::kPromptLayerEnd)) p = p.without(PressPoint::kPromptLayerEnd).with(PressPoint::kPromptEnd);
    if (p.has(PressPoint::kDecodeLayerEnd)) p = p.without(PressPoint::kDecodeLayerEnd).with(PressPoint::kDecodeStep);
    return p;
  }
  void on_attention(const AttentionEvent& event) override {
    AttentionEvent hidden = event;
    hidden.probabilities = nullptr;
    inner_->on_attention(hidden);
  }
  void act(const PressAt& at, KvCache& cache) override {
    if (at.point == PressPoint::kPromptEnd) return testing::press_prompt_ends(*inner_, cache);
    if (at.point == PressPoint::kDecodeStep) return testing::press_decode_step_ends(*inner_, cache, at.step);
    inner_->act(at, cache);
  }
  std::string describe() const override { return inner_->describe(); }

 private:
  std::unique_ptr<Press> inner_;
};

struct Trace {
  std::vector<std::vector<float>> logits;                   // after the prefill and each step
  std::vector<std::vector<std::vector<int32_t>>> kept;      // [step][layer * n_head_kv + g]
};

Trace run(const std::string& spec, const std::string& cache_type, bool hide_scores) {
  static const auto model = Model::load(testing::press_test_model_path());
  SessionOptions options;
  options.n_ctx = 256;
  options.n_batch = 24;
  options.cache_type_k = options.cache_type_v = cache_type;
  Session session(model, std::make_shared<ThreadPool>(2), options);
  std::unique_ptr<Press> press = make_press(spec, KvBudget::per_head(24));
  if (hide_scores) press = std::make_unique<WithoutKeptScores>(std::move(press));
  session.set_press(std::move(press));
  const int64_t n_vocab = model->config().n_vocab;
  Trace trace;
  auto record = [&] {
    const float* l = session.last_logits();
    trace.logits.emplace_back(l, l + n_vocab);
    const KvCache& kv = kv_cache_of(session);
    trace.kept.emplace_back();
    for (int64_t layer = 0; layer < kv.n_layer(); ++layer) {
      for (int64_t g = 0; g < kv.n_head_kv(); ++g) {
        trace.kept.back().emplace_back(kv.positions(layer, g), kv.positions(layer, g) + kv.length(layer, g));
      }
    }
    return static_cast<int32_t>(std::max_element(l, l + n_vocab) - l);
  };
  session.prefill(testing::random_prompt(60));
  int32_t token = record();
  for (int step = 0; step < 40; ++step) {
    session.decode(token);
    token = record();
  }
  return trace;
}

TEST(PerStepCapture, KeptProbabilitiesChangeNeitherKeptSetsNorLogits) {
  for (const std::string spec : {"moment_kv:decode_budget=8", "tova", "h2o:per_step=true", "snapkv:window=8,every=3",
                                 "streaming_llm:per_step=true", "snapkv:window=8+moment_kv:decode_budget=8",
                                 "deferkv:window=8,d=2"}) {
    for (const std::string& type : testing::press_test_cache_types()) {
      const Trace kept = run(spec, type, false), computed = run(spec, type, true);
      ASSERT_EQ(kept.kept.size(), computed.kept.size());
      for (size_t s = 0; s < kept.kept.size(); ++s) {
        ASSERT_EQ(kept.kept[s], computed.kept[s]) << spec << ", " << type << ", step " << s;
        ASSERT_EQ(std::memcmp(kept.logits[s].data(), computed.logits[s].data(), kept.logits[s].size() * sizeof(float)), 0)
            << spec << ", " << type << ", logits of step " << s;
      }
      // The press did evict while decoding (the test would be empty otherwise).
      EXPECT_LT(kept.kept.back()[0].size(), 60u + 40u) << spec;
    }
  }
}

}  // namespace
}  // namespace deferkv
