// Eviction inside the prefill: Session::prefill runs a press's prompt layer by layer
// (ForwardPass::run_prompt) and a one-shot press evicts each layer as soon as the whole
// prompt has passed it (PressPoint::kPromptLayerEnd). Compared with the after-prefill
// eviction as the session ran it before, recorded here on its own: the same press over
// ForwardPass::run batch by batch (the prompt through every layer one batch at a time),
// given every layer's end only after the whole prompt. The cache (kept positions, their stored keys and
// values byte for byte) and the logits after the prefill and after each decode step must be
// identical, and the prefill's peak KV must be exactly the last layer's full prompt plus
// the other layers' kept entries.
//
// Mutants applied to the engine, run, seen failing, reverted (the tests that failed):
//   run_prompt calls layer_done(l) before the last batch of layer l
//   (one layer evicted one batch too early)                          -> every SamePrefill* case
//                                                                       (kept sets, logits),
//                                                                       AllLogits, ComposedOrder
//   run_prompt calls layer_done(l - 1) after layer l's first batch,
//   the last layer's at the prompt's end (one layer too late)          -> every SamePrefill* case
//                                                                       (the peak only)
//   run_prompt runs a layer's batches last to first (chunk order)    -> every test here
//   ComposedPress forwards a layer to the later parts after one
//   that kept it whole                                               -> ComposedOrder
//   ComposedPress delays every part's layer ends to the prompt's end -> ComposedOrder, the composed
//                                                                       SamePrefill* cases (the peak)
#include <gtest/gtest.h>

#include <cctype>
#include <fstream>
#include <ostream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "base/thread_pool.h"
#include "deferkv/error.h"
#include "deferkv/session.h"
#include "engine/session_internals.h"
#include "observe/attention_tap.h"
#include "kernels/matvec.h"
#include "kv/kv_cache.h"
#include "model/forward_pass.h"
#include "model/test_models.h"
#include "press/core/composed_press.h"
#include "press/press_test_util.h"
#include "support/scratch_dir.h"
#include "tensor/safetensors_test_util.h"

namespace deferkv {
namespace {

constexpr int64_t kLayers = 4, kHeads = 4, kKvHeads = 2, kHeadDim = 32;
constexpr int64_t kBatch = 64, kPrompt = 300, kContext = 512, kDecode = 3;  // 5 batches, the last one short
constexpr int64_t kBudget = 40;

std::shared_ptr<const Model> gqa_model() {
  static std::shared_ptr<const Model> model = [] {
    RandomModelSpec spec;
    spec.n_embd = 64;
    spec.n_layer = kLayers;
    spec.n_head = kHeads;
    spec.n_head_kv = kKvHeads;
    spec.head_dim = kHeadDim;
    spec.n_ff = 128;
    spec.seed = 41;
    return Model::load(testing::random_model_path(spec));
  }();
  return model;
}

std::string compresskv_profile() {
  const std::string path = testing::scratch_file("prefill-eviction-ckv.json");
  std::ofstream(path) << R"({"format": "deferkv-compresskv-profile/1",
    "model": {"name": "prefill-eviction-test", "n_layer": 4, "n_head": 4},
    "retrieval_heads": [[0, 1], [2, 3], [3, 0], [1]],
    "layer_scores": [0.4, 0.3, 0.2, 0.1]})";
  return path;
}

// Random per-model files of this model's shape: Q-Filters and Expected Attention's statistics.
std::vector<float> normal_values(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = normal(rng);
  return v;
}
std::string qfilters_file() {
  const std::string path = testing::scratch_file("prefill-eviction-qfilters.safetensors");
  safetensors_test::write_safetensors(path, {}, {safetensors_test::f32_tensor("q_filters", {kLayers, kKvHeads, kHeadDim},
                                                                            normal_values(kLayers * kKvHeads * kHeadDim, 1))});
  return path;
}
std::string query_stats_file() {
  const std::string path = testing::scratch_file("prefill-eviction-stats.safetensors");
  std::vector<float> cov(static_cast<size_t>(kLayers * kHeads * kHeadDim * kHeadDim), 0.0f);
  for (int64_t i = 0; i < kLayers * kHeads * kHeadDim; ++i) cov[static_cast<size_t>(i * kHeadDim + i % kHeadDim)] = 0.5f;
  safetensors_test::write_safetensors(
      path, {},
      {safetensors_test::f32_tensor("query_mean", {kLayers, kHeads, kHeadDim}, normal_values(kLayers * kHeads * kHeadDim, 2)),
       safetensors_test::f32_tensor("query_cov", {kLayers, kHeads, kHeadDim, kHeadDim}, cov)});
  return path;
}

struct Outcome {
  KvCache::Snapshot cache;
  std::vector<std::vector<float>> logits;  // after the prefill (all rows with all_logits), then each decode step
  int64_t peak_after_prefill = 0;
  std::vector<int64_t> layer_bytes_after_prefill;
};

int32_t argmax(const float* logits, int64_t n) { return static_cast<int32_t>(std::max_element(logits, logits + n) - logits); }

// The session offers these presses nothing beyond observation here.
class NoCapabilities final : public PressHost {
 public:
  void reserve_after_prompt(int64_t) override { refuse(); }
  void reserve_prompt_length_after_prompt(int64_t) override { refuse(); }
  std::vector<int32_t> encode_text(const std::string&) override { refuse(); }
  std::vector<PromptFrame> prompt_frames() override { refuse(); }
  const std::string& model_path() override { refuse(); }
  const std::vector<int32_t>& prompt_tokens() override { refuse(); }
  void use_draft_model() override { refuse(); }
  const ModelReadout& read_model_output(ResidualObserver) override { refuse(); }
  void greedy_lookahead(int64_t, const std::function<void(KvCache&)>&, const AttentionObserver&) override { refuse(); }
  std::vector<int32_t> draft(int64_t) override { refuse(); }
  void run_after_prompt(const std::vector<int32_t>&, const AttentionObserver&) override { refuse(); }
  void run_after_prompt(const LookaheadRows&, const AttentionObserver&) override { refuse(); }
  void refeed_last_token() override { refuse(); }
  void continue_at(int64_t) override { refuse(); }

 private:
  [[noreturn]] static void refuse() { fail("this test offers presses no capability"); }
};

// The after-prefill eviction: the prompt batch by batch through every layer, then the
// press's prompt end (each layer's end, then the end); greedy decode steps, each followed
// by the step's end.
Outcome after_prefill(const std::string& spec, const std::vector<int32_t>& prompt, const std::string& cache_type,
                      bool all_logits) {
  const std::shared_ptr<const Model> model = gqa_model();
  const ModelConfig& c = model->config();
  ThreadPool pool(2);
  init_blas_single_threaded();  // as a session sets it up: OpenBLAS's threads would sum in another order
  const DType type = kv_cache_type_from_name(cache_type);
  KvCache cache(c.n_layer, c.n_head_kv, c.head_dim, kContext, {type, type});
  ForwardPass forward(c, model->weights(), kBatch, kContext, pool);
  std::unique_ptr<Press> press = make_press(spec, KvBudget::per_head(kBudget));
  NoCapabilities host;
  press->on_attach({c.n_layer, c.n_head, c.n_head_kv, c.head_dim, c.n_embd, c.n_ff}, host);
  forward.set_attention_tap([&](const AttentionEvent& event) { press->on_attention(event); });

  const auto n = static_cast<int64_t>(prompt.size());
  std::vector<int32_t> positions(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) positions[static_cast<size_t>(i)] = static_cast<int32_t>(i);
  std::vector<float> logits(static_cast<size_t>((all_logits ? n : 1) * c.n_vocab));
  testing::press_prompt_begins(*press, cache, 0, n);
  for (int64_t begin = 0; begin < n; begin += kBatch) {
    const int64_t m = std::min(kBatch, n - begin);
    float* out = all_logits ? logits.data() + begin * c.n_vocab : begin + m == n ? logits.data() : nullptr;
    forward.run(prompt.data() + begin, positions.data() + begin, m, cache, all_logits, out);
  }
  testing::press_prompt_ends(*press, cache);

  Outcome o;
  o.peak_after_prefill = cache.peak_bytes();
  for (int64_t l = 0; l < c.n_layer; ++l) o.layer_bytes_after_prefill.push_back(cache.layer_bytes(l));
  o.logits.push_back(logits);
  for (int64_t step = 1; step <= kDecode; ++step) {
    const int32_t token = argmax(logits.data() + logits.size() - c.n_vocab, c.n_vocab);
    const auto position = static_cast<int32_t>(n + step - 1);
    logits.resize(static_cast<size_t>(c.n_vocab));
    forward.run(&token, &position, 1, cache, false, logits.data());
    testing::press_decode_step_ends(*press, cache, step);
    o.logits.push_back(logits);
  }
  o.cache = cache.snapshot();
  return o;
}

// The same through a session: eviction inside the prefill.
Outcome in_prefill(const std::string& spec, const std::vector<int32_t>& prompt, const std::string& cache_type,
                   bool all_logits) {
  SessionOptions options;
  options.n_ctx = kContext;
  options.n_batch = kBatch;
  options.all_logits = all_logits;
  options.cache_type_k = options.cache_type_v = cache_type;
  Session session(gqa_model(), std::make_shared<ThreadPool>(2), options);
  session.set_press(make_press(spec, KvBudget::per_head(kBudget)));
  session.prefill(prompt);
  Outcome o;
  const KvCache& cache = kv_cache_of(session);
  o.peak_after_prefill = cache.peak_bytes();
  for (int64_t l = 0; l < cache.n_layer(); ++l) o.layer_bytes_after_prefill.push_back(cache.layer_bytes(l));
  o.logits.push_back(session.logits());
  const int64_t n_vocab = session.model().config().n_vocab;
  for (int64_t step = 1; step <= kDecode; ++step) {
    session.decode(argmax(session.last_logits(), n_vocab));
    o.logits.push_back(session.logits());
  }
  o.cache = cache.snapshot();
  return o;
}

void expect_same_cache(const KvCache::Snapshot& a, const KvCache::Snapshot& b) {
  ASSERT_EQ(a.lengths, b.lengths);
  EXPECT_EQ(a.positions, b.positions);
  EXPECT_TRUE(a.keys == b.keys) << "stored keys differ";
  EXPECT_TRUE(a.values == b.values) << "stored values differ";
}

// Bytes of one layer holding the whole prompt.
int64_t full_layer_bytes(const std::string& cache_type) {
  const DType type = kv_cache_type_from_name(cache_type);
  const KvCache probe(1, kKvHeads, kHeadDim, 1, {type, type});
  return kKvHeads * kPrompt * probe.bytes_per_entry();
}

struct Case {
  std::string spec;
  std::string cache_type;
};

void PrintTo(const Case& c, std::ostream* out) { *out << c.spec << " on a " << c.cache_type << " cache"; }

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  std::string name = info.param.spec.substr(0, info.param.spec.find_first_of(":+")) + "_" + info.param.cache_type;
  if (info.param.spec.find('+') != std::string::npos) name = "composed_" + name;
  for (char& ch : name) {
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  }
  return name + "_" + std::to_string(info.index);
}

class SamePrefillAsAfterPrefillEviction : public ::testing::TestWithParam<Case> {};

TEST_P(SamePrefillAsAfterPrefillEviction, KeptSetsLogitsAndPeak) {
  const Case& c = GetParam();
  const std::vector<int32_t> prompt = testing::random_prompt(kPrompt, 17);
  const Outcome before = after_prefill(c.spec, prompt, c.cache_type, false);
  const Outcome now = in_prefill(c.spec, prompt, c.cache_type, false);
  expect_same_cache(before.cache, now.cache);
  ASSERT_EQ(before.logits.size(), now.logits.size());
  for (size_t i = 0; i < now.logits.size(); ++i) EXPECT_TRUE(before.logits[i] == now.logits[i]) << "logits " << i;
  EXPECT_EQ(before.layer_bytes_after_prefill, now.layer_bytes_after_prefill);

  // Layer l fills to the whole prompt while layers 0..l-1 hold what they kept: the peak is
  // at the last layer, the others at their kept bytes.
  const int64_t full = full_layer_bytes(c.cache_type);
  int64_t kept_below_last = 0;
  for (int64_t l = 0; l + 1 < kLayers; ++l) kept_below_last += now.layer_bytes_after_prefill[static_cast<size_t>(l)];
  EXPECT_EQ(now.peak_after_prefill, full + kept_below_last);
  EXPECT_EQ(before.peak_after_prefill, kLayers * full);
  // Within one full layer plus B_total = b * L entries per KV head, as the press declares
  // to the batch engine's admission (PressPoints::evicts_each_prompt_layer, project_kv):
  // the declaration and what the press does agree.
  const int64_t entry = full / (kKvHeads * kPrompt);
  EXPECT_LE(now.peak_after_prefill, full + kLayers * kKvHeads * kBudget * entry);
  EXPECT_TRUE(make_press(c.spec, KvBudget::per_head(kBudget))->points().evicts_each_prompt_layer());
}

std::vector<Case> one_shot_cases() {
  const std::string profile = compresskv_profile();
  const std::vector<std::string> specs = {
      "snapkv",
      "pyramidkv",
      "adakv",
      "chunkkv:reuse=2",
      "h2o",
      "knorm",
      "keydiff",
      "random",
      "lagkv:lag=8",
      "leverage",
      "cur",
      "non_causal_attention",
      "compactor",
      "knorm:alloc=per_layer,ratios=0.8/0.85/0.9/0.95",
      "simlayerkv:lazy_threshold=0,n_recent=16",
      "finch:rerotate=false",
      "expected_attention",
      "expected_attention:stats=" + query_stats_file(),
      "qfilter:filters=" + qfilters_file(),
      "streaming_llm",
      "keydiff:block=16",  // the prompt in pieces, still each layer at its end
      "lagkv:lag=8,block=24",
      "compresskv:profile=" + profile,
      "snapkv:alloc=calibrated,profile=" + profile,
      "tova",                         // per step: its prefill-end cut inside the prefill, then every step
      "h2o:per_step=true",
      "snapkv+moment_kv:decode_budget=2",
      "adakv+tova",
      "full+pyramidkv",
  };
  std::vector<Case> out;
  for (const std::string& type : {"f32", "f16"}) {
    for (const std::string& spec : specs) out.push_back({spec, type});
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(OneShot, SamePrefillAsAfterPrefillEviction, ::testing::ValuesIn(one_shot_cases()), case_name);

TEST(PrefillEviction, AllLogitsAreThoseOfTheAfterPrefillEviction) {
  const std::vector<int32_t> prompt = testing::random_prompt(kPrompt, 5);
  const Outcome before = after_prefill("snapkv", prompt, "f16", true);
  const Outcome now = in_prefill("snapkv", prompt, "f16", true);
  ASSERT_EQ(now.logits.front().size(), static_cast<size_t>(kPrompt * gqa_model()->config().n_vocab));
  EXPECT_TRUE(before.logits.front() == now.logits.front());
  expect_same_cache(before.cache, now.cache);
}

TEST(PrefillEviction, FullCacheIsThatOfBatchByBatch) {
  const std::vector<int32_t> prompt = testing::random_prompt(kPrompt, 9);
  const Outcome before = after_prefill("full", prompt, "f32", false);
  const Outcome now = in_prefill("full", prompt, "f32", false);
  expect_same_cache(before.cache, now.cache);
  EXPECT_TRUE(before.logits == now.logits);
  EXPECT_EQ(now.peak_after_prefill, kLayers * full_layer_bytes("f32"));
  EXPECT_EQ(make_press("full", KvBudget::per_head(kBudget))->points(), PressPoints{});  // it never acts
}

// Presses that read the whole prompt in every layer after the prefill act at its end: their
// peak is the whole prompt in every layer, as they declare to the admission. (DeferKV only
// with pool=all: its default pool cuts each layer inside the prefill, kept_set_pool_test.cpp.)
TEST(PrefillEviction, PressesThatNeedTheFullCacheKeepTheirPeak) {
  const std::vector<int32_t> prompt = testing::random_prompt(200, 3);
  for (const std::string spec : {"laq", "lookaheadkv:weights={lookahead_weights}", "behavior_preserving",
                                 "deferkv:d=2,pool=all", "laq+moment_kv:decode_budget=4", "kvzip:chunk_size=64"}) {
    const testing::PressRun run = testing::run_press(spec, KvBudget::per_head(kBudget), prompt, 2);
    const KvCache& cache = kv_cache_of(*run.session);
    const int64_t full = cache.n_layer() * cache.n_head_kv() * 200 * cache.bytes_per_entry();
    EXPECT_GE(cache.peak_bytes(), full) << spec;
    EXPECT_LT(cache.bytes_held(), full) << spec << " evicted nothing";
    // DeferKV does nothing at the prompt (it evicts at step d); the others act at its end.
    const PressPoints points = run.session->press()->points();
    EXPECT_FALSE(points.evicts_each_prompt_layer()) << spec;
    EXPECT_FALSE(points.has(PressPoint::kPromptLayerEnd)) << spec;
    EXPECT_EQ(points.has(PressPoint::kPromptEnd), spec != "deferkv:d=2,pool=all") << spec;
  }
}

// A press that acts at the prompt's end only: what it saw of the cache then.
class WholeUntilEnd final : public Press {
 public:
  explicit WholeUntilEnd(std::vector<int64_t>& lengths) : lengths_(lengths) {}
  PressPoints points() const override { return {PressPoint::kPromptEnd}; }
  void act(const PressAt& at, KvCache& cache) override {
    ASSERT_EQ(at.point, PressPoint::kPromptEnd);
    for (int64_t l = 0; l < cache.n_layer(); ++l) lengths_.push_back(cache.length(l, 0));
  }
  std::string describe() const override { return "whole_until_end"; }

 private:
  std::vector<int64_t>& lengths_;
};

// Composed after such a press, a one-shot press's layer ends wait for the prompt's end;
// composed before it, it evicts each layer inside the prefill, so the other finds the
// layers cut.
TEST(PrefillEviction, ComposedOrder) {
  const std::vector<int32_t> prompt = testing::random_prompt(kPrompt, 21);
  for (const bool snapkv_first : {false, true}) {
    std::vector<int64_t> seen;
    std::vector<RolePress> parts;
    parts.push_back({std::make_unique<WholeUntilEnd>(seen), PressRole{false, false}});
    parts.push_back({make_press("snapkv", KvBudget::per_head(kBudget)), PressRole{}});
    if (snapkv_first) std::swap(parts[0], parts[1]);
    SessionOptions options;
    options.n_ctx = kContext;
    options.n_batch = kBatch;
    Session session(gqa_model(), std::make_shared<ThreadPool>(2), options);
    session.set_press(compose_presses(std::move(parts)));
    // Either way the composition acts at the prompt's end: the admission reserves the
    // whole prompt.
    EXPECT_FALSE(session.press()->points().evicts_each_prompt_layer());
    session.prefill(prompt);
    const std::vector<int64_t> whole(kLayers, kPrompt), cut(kLayers, kBudget);
    EXPECT_EQ(seen, snapkv_first ? cut : whole);
    const KvCache& cache = kv_cache_of(session);
    EXPECT_EQ(cache.entries(kLayers - 1), kKvHeads * kBudget);
    // SnapKV first evicts every layer as the prompt passes it (a part's layer ends wait only
    // behind a part that acts at the end): the peak is the last layer whole beside the
    // others' budgets. After the other press, every layer is whole at the end.
    const int64_t entry = cache.bytes_per_entry();
    EXPECT_EQ(cache.peak_bytes(), snapkv_first ? kKvHeads * (kPrompt + (kLayers - 1) * kBudget) * entry
                                               : kLayers * kKvHeads * kPrompt * entry);
  }
}

}  // namespace
}  // namespace deferkv
