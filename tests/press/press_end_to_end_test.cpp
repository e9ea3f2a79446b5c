// Every press on a random model: the invariants of the cache after eviction, the
// equivalences with full-cache decoding, and a dense-masked double-precision reference.
#include <gtest/gtest.h>

#include <algorithm>

#include "base/thread_pool.h"
#include "engine/session_internals.h"
#include "kv/kv_cache.h"
#include "model/reference_forward.h"
#include "press/press_test_util.h"

namespace deferkv {
namespace {

using testing::random_prompt;
using testing::run_press;

constexpr int64_t kPrompt = 150;
constexpr int64_t kDecode = 6;

struct PressCase {
  std::string spec;
  int64_t window;      // prompt tokens always kept (0: none)
  bool per_head_cap;   // every head keeps at most b prompt entries (else only the total is capped)
  bool keeps_decode;   // decode tokens are never evicted
};

const std::vector<PressCase>& all_cases() {
  static const std::vector<PressCase> cases = {
      {"snapkv:window=8", 8, true, true},
      {"snapkv:window=16,pooling=avg,kernel=5,gqa=max", 16, true, true},
      {"pyramidkv:window=8", 8, false, true},
      {"adakv:window=8", 8, false, true},
      {"chunkkv:window=8,chunk=4,reuse=2", 8, true, true},
      {"deferkv:window=8", 8, true, true},
      {"deferkv:window=8,d=3,base=adakv", 8, false, true},
      {"deferkv:window=8,d=2,base=pyramidkv,temporal_mode=per_query", 8, false, true},
      {"deferkv:window=8,no_decode_feedback=true", 8, true, true},
      {"deferkv:window=8,no_temporal_weighting=true", 8, true, true},
      {"deferkv:window=8,d=2,pool_order=pool_then_fuse", 8, true, true},
      // The cases above run the default pool (2x the budget); the paper's whole prompt too.
      {"deferkv:window=8,pool=all", 8, true, true},
      {"deferkv:window=8,d=2,base=pyramidkv,pool=all", 8, false, true},
      {"h2o", 8, true, true},
      {"h2o:per_step=true", 0, true, false},
      {"expected_attention", 0, true, true},
      {"expected_attention:use_covariance=false,use_vnorm=false,n_sink=2", 0, true, true},
      {"tova:per_step=false", 0, true, true},
      {"tova", 0, true, false},
      {"tova:every=3", 0, false, false},
      {"h2o:per_step=true,every=2,recent=6", 0, false, false},
      {"streaming_llm:per_step=true", 0, true, false},
      {"knorm", 0, true, true},
      {"keydiff", 0, true, true},
      {"keydiff:every=3", 0, false, false},
      {"random", 0, true, true},
      {"random:seed=3,alloc=adakv", 0, false, true},
      {"lagkv:lag=8", 0, true, true},
      {"lagkv:lag=8,cross_scoring=true,every=3", 0, false, false},
      {"leverage", 0, true, true},
      {"leverage:sketch_dimension=8,every=3", 0, false, false},
      {"cur", 0, true, true},
      {"cur:leverage_type=kv_avg,use_random_leverage=true,alloc=adakv", 0, false, true},
      {"non_causal_attention:chunk_size=16", 0, true, true},
      {"compactor", 4, true, true},
      {"snapkv:window=8,alloc=per_layer,ratios=0.85/0.9/0.95", 8, true, true},
      {"criticalkv:window=8", 8, true, true},
      {"criticalkv:window=8,alloc=adakv,first_stage_ratio=0.25", 8, false, true},
      {"finch:window=8,rerotate=false", 8, true, true},
      {"kvzip:chunk_size=48", 0, false, true},
      {"kvzip:chunk_size=48,alloc=uniform", 0, true, true},
      {"laq:window=8", 0, true, true},
      {"laqpp:window=8,n_lookahead=3", 8, true, true},
      {"streaming_llm", 0, true, true},
      {"lookaheadkv:window=8,weights={lookahead_weights}", 8, true, true},
      {"behavior_preserving:window=8", 8, true, true},
      {"behavior_preserving:window=8,queries=4,top_k=64,flexible=true", 8, false, true},
      {"behavior_preserving:window=4,sinks=2,every=3,block=8", 0, true, false},
      {"keydiff:block=16", 0, true, true},
      {"lagkv:lag=8,block=24", 0, true, true},
  };
  return cases;
}

// Every press on every cache type of press_test_cache_types().
class EveryPress : public ::testing::TestWithParam<std::tuple<PressCase, std::string>> {
 protected:
  const PressCase& press() const { return std::get<0>(GetParam()); }
  const std::string& cache_type() const { return std::get<1>(GetParam()); }
};

TEST_P(EveryPress, CacheInvariantsAfterEviction) {
  const PressCase& c = press();
  const auto prompt = random_prompt(kPrompt);
  const auto full = run_press("full", {}, prompt, kDecode, cache_type());
  for (int64_t b : {24, 40, 100}) {
    SCOPED_TRACE(c.spec + " b=" + std::to_string(b));
    const auto run = run_press(c.spec, KvBudget::per_head(b), prompt, kDecode, cache_type());
    const KvCache& kv = kv_cache_of(*run.session);
    const KvCache& reference = kv_cache_of(*full.session);
    int64_t prompt_entries = 0, entries = 0;
    for (int64_t l = 0; l < kv.n_layer(); ++l) {
      for (int64_t g = 0; g < kv.n_head_kv(); ++g) {
        const auto& pos = run.positions[l][g];
        const auto n_prompt = std::count_if(pos.begin(), pos.end(), [](int32_t p) { return p < kPrompt; });
        prompt_entries += n_prompt;
        entries += static_cast<int64_t>(pos.size());
        if (c.per_head_cap) EXPECT_LE(n_prompt, b);
        EXPECT_TRUE(std::is_sorted(pos.begin(), pos.end()) && std::adjacent_find(pos.begin(), pos.end()) == pos.end());
        for (int64_t p = kPrompt - c.window; p < kPrompt; ++p) {
          EXPECT_TRUE(std::binary_search(pos.begin(), pos.end(), p)) << "window position " << p << " evicted";
        }
        if (c.keeps_decode) {
          for (int64_t p = kPrompt; p < kPrompt + kDecode; ++p) EXPECT_TRUE(std::binary_search(pos.begin(), pos.end(), p));
        } else {
          EXPECT_LE(static_cast<int64_t>(pos.size()), b);
        }
        // Kept prompt entries are the very keys and values stored at their position.
        for (size_t i = 0; i < pos.size() && pos[i] < kPrompt; ++i) {
          const auto same_row = [&](const KvRows& kept, const KvRows& all) {
            return std::equal(kept.row(i), kept.row(i) + kept.row_bytes(), all.row(pos[i]));
          };
          EXPECT_TRUE(same_row(kv.keys(l, g), reference.keys(l, g)));
          EXPECT_TRUE(same_row(kv.values(l, g), reference.values(l, g)));
        }
      }
    }
    EXPECT_LE(prompt_entries, kv.n_layer() * kv.n_head_kv() * b);
    EXPECT_EQ(kv.bytes_held(), entries * kv.bytes_per_entry());
    EXPECT_LT(kv.bytes_held(), reference.bytes_held());
    ASSERT_TRUE(run.session->last_eviction().has_value());
  }
}

TEST_P(EveryPress, BudgetCoveringThePromptChangesNothing) {
  const auto prompt = random_prompt(kPrompt);
  const auto full = run_press("full", {}, prompt, kDecode, cache_type());
  const auto run = run_press(press().spec, KvBudget::per_head(kPrompt + kDecode + 1), prompt, kDecode, cache_type());
  EXPECT_EQ(run.generated, full.generated);
  EXPECT_EQ(kv_cache_of(*run.session).bytes_held(), kv_cache_of(*full.session).bytes_held());
  EXPECT_FALSE(run.session->last_eviction().has_value());
}

INSTANTIATE_TEST_SUITE_P(Presses, EveryPress,
                         ::testing::Combine(::testing::ValuesIn(all_cases()),
                                            ::testing::ValuesIn(testing::press_test_cache_types())),
                         [](const auto& info) {
                           const auto& cases = all_cases();
                           const auto at = std::find_if(cases.begin(), cases.end(), [&](const PressCase& c) {
                             return c.spec == std::get<0>(info.param).spec;
                           });
                           return "p" + std::to_string(at - cases.begin()) + "_" + std::get<1>(info.param);
                         });

TEST(DeferKv, WithoutDecodeFeedbackKeepsExactlyTheBasesSet) {
  const auto prompt = random_prompt(kPrompt, 5);
  for (const std::string base : {"snapkv", "pyramidkv", "adakv"}) {
    SCOPED_TRACE(base);
    const auto one_shot = run_press(base + ":window=8", KvBudget::per_head(40), prompt, 3);
    // pool=all: a pool chosen with scores carried ahead (pool_ahead) may leave out an entry
    // of the base's set; the ablation is the paper's, on the whole prompt.
    const auto deferred = run_press("deferkv:window=8,d=2,no_decode_feedback=true,pool=all,base=" + base,
                                    KvBudget::per_head(40), prompt, 3);
    for (size_t l = 0; l < one_shot.positions.size(); ++l) {
      for (size_t g = 0; g < one_shot.positions[l].size(); ++g) {
        EXPECT_EQ(one_shot.positions[l][g], deferred.positions[l][g]) << "layer " << l << " head " << g;
      }
    }
  }
}

TEST(DeferKv, DecodeFeedbackChangesTheKeptSet) {
  // The decode query is a different observer: at a tight budget some choice differs.
  const auto prompt = random_prompt(kPrompt, 5);
  const auto snap = run_press("snapkv:window=8", KvBudget::per_head(24), prompt, 2);
  const auto deferred = run_press("deferkv:window=8", KvBudget::per_head(24), prompt, 2);
  EXPECT_GT(testing::differing_heads(snap, deferred), 0);
}

// With pool=all (the paper's): the first d steps run on the whole prompt. (With a pool they
// run on the pool, kept_set_pool_test.cpp.)
TEST(DeferKv, FirstTokensEqualFullCacheDecoding) {
  const auto prompt = random_prompt(kPrompt, 9);
  const auto full = run_press("full", {}, prompt, 8);
  for (int64_t d : {1, 2, 4}) {
    const auto run =
        run_press("deferkv:window=8,pool=all,d=" + std::to_string(d), KvBudget::per_head(24), prompt, 8);
    // y_1 comes from the prefill and y_2 .. y_{d+1} from decode steps 1..d on the full cache.
    EXPECT_TRUE(std::equal(full.generated.begin(), full.generated.begin() + d + 1, run.generated.begin())) << d;
    ASSERT_TRUE(run.session->last_eviction().has_value());
    EXPECT_EQ(run.session->last_eviction()->decode_step, d);
  }
}

// The compacted ragged cache gives the logits of a dense double-precision forward in
// which every evicted key is masked out for the queries after the eviction, and which
// stores keys and values rounded as the cache's type stores them.
class CompressedCache : public ::testing::TestWithParam<std::string> {};

// The key shifts the cache chose (the reference takes them as given; kv_cache_types_test
// checks how they are chosen).
testing::KeyShifts key_shifts_of(const KvCache& cache) {
  testing::KeyShifts shifts(static_cast<size_t>(cache.n_layer()));
  for (int64_t l = 0; l < cache.n_layer(); ++l) {
    for (int64_t g = 0; g < cache.n_head_kv(); ++g) {
      const float* shift = cache.keys(l, g).coding.shift;
      shifts[l].emplace_back(shift, shift == nullptr ? shift : shift + cache.head_dim());
    }
  }
  return shifts;
}

TEST_P(CompressedCache, MatchesADenseMaskedReference) {
  const auto prompt = random_prompt(kPrompt, 13);
  const DType type = kv_cache_type_from_name(GetParam());
  // f32 arithmetic against f64; a quantised type also where a float32 projection and its
  // f64 twin round to different steps (rare; see forward_cache_types_test.cpp).
  const double tolerance = type == DType::Q8_0 ? 1e-3 : 1e-4;
  for (const std::string spec :
       {"snapkv:window=8", "adakv:window=8", "deferkv:window=8,d=2,base=adakv,pool=all", "h2o",
        "behavior_preserving:window=8"}) {
    SCOPED_TRACE(spec);
    const auto run = run_press(spec, KvBudget::per_head(32), prompt, 5, GetParam());
    const int64_t evicted_after = run.session->last_eviction()->decode_step;  // queries after it see the cut cache
    std::vector<int32_t> tokens = prompt;
    tokens.insert(tokens.end(), run.generated.begin(), run.generated.end() - 1);
    const auto& kept = run.positions;
    const KvCache& cache = kv_cache_of(*run.session);
    const auto stored_as = testing::rounded_as(type, cache.head_dim(), key_shifts_of(cache));
    const auto reference = testing::reference_logits(
        testing::press_test_model_path(), tokens, [&](int64_t l, int64_t g, int64_t key, int64_t query) {
          if (query < kPrompt + evicted_after || key >= kPrompt) return true;
          return std::binary_search(kept[l][g].begin(), kept[l][g].end(), static_cast<int32_t>(key));
        }, stored_as);
    // run.logits[0] is the prefill's (position T-1), run.logits[s] decode step s's.
    for (size_t s = 0; s < run.logits.size(); ++s) {
      EXPECT_LT(testing::relative_l2(run.logits[s].data(), reference[kPrompt - 1 + s]), tolerance) << "step " << s;
    }
    // And the mask matters: the unmasked reference differs after the eviction.
    const auto dense = testing::reference_logits(testing::press_test_model_path(), tokens, {}, stored_as);
    EXPECT_GT(testing::relative_l2(run.logits.back().data(), dense[tokens.size() - 1]), 1e-3);
  }
}

INSTANTIATE_TEST_SUITE_P(CacheTypes, CompressedCache, ::testing::ValuesIn(testing::press_test_cache_types()),
                         [](const auto& info) { return info.param; });

// Keeps, at the end of the prefill, exactly the given positions of each (layer, head).
class FixedSetPress final : public Press {
 public:
  explicit FixedSetPress(std::vector<std::vector<std::vector<int32_t>>> keep) : keep_(std::move(keep)) {}
  std::string describe() const override { return "fixed"; }
  PressPoints points() const override { return {PressPoint::kPromptEnd}; }
  void act(const PressAt&, KvCache& cache) override {
    for (int64_t l = 0; l < cache.n_layer(); ++l) {
      for (int64_t g = 0; g < cache.n_head_kv(); ++g) {
        std::vector<int32_t> indices;
        for (int32_t p : keep_[l][g]) {
          if (p < kPrompt) indices.push_back(p);  // the full prompt is in the cache: index = position
        }
        cache.retain(l, g, indices);
      }
    }
  }

 private:
  std::vector<std::vector<std::vector<int32_t>>> keep_;
};

TEST(Laq, LookaheadLeavesTheRealGenerationAsAFreshSessionOnTheFinalCache) {
  const auto prompt = random_prompt(kPrompt, 21);
  for (const std::string spec : {"laq:window=8", "laqpp:window=16,n_lookahead=4"}) {
    SCOPED_TRACE(spec);
    const auto laq = run_press(spec, KvBudget::per_head(32), prompt, 8);
    const auto full = run_press("full", {}, prompt, 0);
    EXPECT_EQ(laq.generated.front(), full.generated.front());  // y_1 comes from the prefill logits
    ASSERT_TRUE(laq.session->last_eviction().has_value());
    EXPECT_LT(kv_cache_of(*laq.session).bytes_held(), kv_cache_of(*full.session).bytes_held());
    // The pseudo queries did the scoring: without them LAQ (no local window) would have
    // all-zero scores and keep the earliest 32 entries.
    EXPECT_NE(laq.positions[0][0].at(31), 31);
    auto model = Model::load(testing::press_test_model_path());
    // Replay: a session whose cache is cut to LAQ's final prompt set right after prefill.
    Session replay(model, std::make_shared<ThreadPool>(2), [] {
      SessionOptions o;
      o.n_ctx = 512;
      o.cache_type_k = o.cache_type_v = "f32";  // as run_press's
      return o;
    }());
    replay.set_press(std::make_unique<FixedSetPress>(laq.positions));
    replay.prefill(prompt);
    std::vector<int32_t> generated = {laq.generated.front()};
    for (int s = 0; s < 8; ++s) {
      replay.decode(generated.back());
      const float* l = replay.last_logits();
      generated.push_back(static_cast<int32_t>(std::max_element(l, l + model->config().n_vocab) - l));
    }
    EXPECT_EQ(generated, laq.generated);
    EXPECT_EQ(kv_cache_of(replay).bytes_held(), kv_cache_of(*laq.session).bytes_held());
  }
}

TEST(Laq, PseudoQueriesChangeTheChoiceFromStageOne) {
  const auto prompt = random_prompt(kPrompt, 21);
  const auto snap = run_press("snapkv:window=8", KvBudget::per_head(24), prompt, 1);
  const auto laq = run_press("laqpp:window=8", KvBudget::per_head(24), prompt, 1);
  EXPECT_GT(testing::differing_heads(snap, laq), 0);
}

TEST(Session, CheckpointRollbackRestoresCacheAndLogits) {
  const auto prompt = random_prompt(60);
  auto run = run_press("full", {}, prompt, 0);
  Session& s = *run.session;
  const auto saved = s.checkpoint();
  const std::vector<float> logits(s.last_logits(), s.last_logits() + s.model().config().n_vocab);
  s.decode(5);
  s.decode(6);
  const std::vector<float> after_two(s.last_logits(), s.last_logits() + s.model().config().n_vocab);
  s.rollback(*saved);
  EXPECT_EQ(s.n_past(), 60);
  EXPECT_EQ(std::vector<float>(s.last_logits(), s.last_logits() + logits.size()), logits);
  EXPECT_EQ(kv_cache_of(s).length(0, 0), 60);
  s.decode(5);
  s.decode(6);
  EXPECT_EQ(std::vector<float>(s.last_logits(), s.last_logits() + after_two.size()), after_two);
}

}  // namespace
}  // namespace deferkv
