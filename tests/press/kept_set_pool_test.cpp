// DeferKV's candidate pool (pool=P) [docs/methods/deferkv.md, "Candidate pool"] on the
// kept-set fixture (kept_set_reference.h): the pool re-derived in double precision from the
// reference forward's prompt window, and the choice at step d from a reference forward
// whose decode queries see only the pool (with the keys at their true positions).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "deferkv/session.h"
#include "engine/kv_admission.h"
#include "model/reference_forward.h"
#include "press/kept_set_reference.h"
#include "press/press_test_util.h"

namespace deferkv {
namespace {

using testing::best;
using testing::Positions;
using testing::Scores;
using testing::span;
using testing::united;

constexpr int64_t kPrompt = 160, kBudget = 72, kLayers = 4, kWindow = 32, kKernel = 7;
constexpr double kEta = 0.7, kAlpha = 0.2;
const testing::AttentionShape kShape = testing::kKeptSetShape;
using Kept = std::vector<std::vector<Positions>>;  // [layer][KV head]: positions, ascending

const std::vector<int32_t>& prompt() {
  static const std::vector<int32_t> p = testing::distinct_prompt(kPrompt);
  return p;
}

testing::PressRun run(const std::string& spec, int64_t n_decode) {
  return testing::run_press_on_model(testing::kept_set_model_path(), spec, KvBudget::per_head(kBudget), prompt(),
                                     n_decode);
}

// The mean over KV head g's query heads of query t's attention on `keys`, by key.
Scores head_attention(const testing::ReferenceTrace& trace, int64_t l, int64_t g, int64_t t, const Positions& keys) {
  Scores out(keys.size(), 0.0);
  for (int64_t h = g * kShape.group(); h < (g + 1) * kShape.group(); ++h) {
    const Scores row = testing::attention_row(trace, kShape, l, h, t, keys);
    for (size_t i = 0; i < keys.size(); ++i) out[i] += row[i] / static_cast<double>(kShape.group());
  }
  return out;
}

// The prompt window's mean attention on the candidates [0, T - w), every prompt key visible.
Scores window_attention(int64_t l, int64_t g) {
  const testing::ReferenceTrace& trace = testing::kept_set_trace(kPrompt);
  Scores s(kPrompt - kWindow, 0.0);
  for (int64_t t = kPrompt - kWindow; t < kPrompt; ++t) {
    const Scores row = head_attention(trace, l, g, t, span(0, t + 1));
    for (int64_t j = 0; j < kPrompt - kWindow; ++j) s[j] += row[j] / kWindow;
  }
  return s;
}

// Per head of a layer, how many of its scored candidates it keeps: SnapKV's uniform or AdaKV's.
std::vector<int64_t> counts(const std::string& base, const std::vector<Scores>& heads, int64_t per_head) {
  if (base == "adakv") return testing::adakv_budgets(heads, per_head, kAlpha);
  return std::vector<int64_t>(heads.size(), per_head);
}

// s[i] := max(s[i - ahead .. i]): each score carried to the `ahead` candidates after it.
Scores carried_ahead(const Scores& s, int64_t ahead) {
  Scores out(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    out[i] = *std::max_element(s.begin() + static_cast<int64_t>(i) - std::min<int64_t>(ahead, static_cast<int64_t>(i)),
                               s.begin() + static_cast<int64_t>(i) + 1);
  }
  return out;
}

// The pool: SnapKV's score (the window's attention, max-pooled; with pool_ahead, carried
// ahead) under the base's allocation at P - w candidates per head, the window added.
Kept reference_pool(const std::string& base, int64_t pool, int64_t ahead = 0) {
  Kept out;
  for (int64_t l = 0; l < kLayers; ++l) {
    std::vector<Scores> heads;
    for (int64_t g = 0; g < kShape.n_head_kv; ++g) {
      heads.push_back(carried_ahead(testing::max_pool(window_attention(l, g), kKernel), ahead));
    }
    const std::vector<int64_t> n = counts(base, heads, pool - kWindow);
    out.emplace_back();
    for (int64_t g = 0; g < kShape.n_head_kv; ++g) {
      out.back().push_back(united(best(heads[g], n[g]), span(kPrompt - kWindow, kPrompt)));
    }
  }
  return out;
}

// DeferKV (d = 1, block mode) on the pool: step 1's token y_1 fed after the prompt, its
// queries seeing only the pool (and themselves) in every layer; the fused score
// F = (eta S_P + S_1) / (eta + 1) over the pool's candidates in position order, max-pooled
// along them (the pool's neighbours), and the base's allocation at b - w.
Kept reference_choice(const std::string& base, const Kept& pool, int32_t y1) {
  std::vector<int32_t> tokens = prompt();
  tokens.push_back(y1);
  const testing::ReferenceTrace trace = testing::reference_trace(
      testing::kept_set_model_path(), tokens, [&](int64_t l, int64_t g, int64_t key, int64_t query) {
        if (query < kPrompt || key >= kPrompt) return true;
        const Positions& p = pool[l][g];
        return std::binary_search(p.begin(), p.end(), static_cast<int32_t>(key));
      });
  Kept out;
  for (int64_t l = 0; l < kLayers; ++l) {
    std::vector<Scores> heads;
    std::vector<Positions> candidates;
    for (int64_t g = 0; g < kShape.n_head_kv; ++g) {
      const Scores window = window_attention(l, g);
      Positions keys = united(pool[l][g], {static_cast<int32_t>(kPrompt)});
      const Scores step = head_attention(trace, l, g, kPrompt, keys);
      Positions c;
      Scores fused;
      for (size_t i = 0; i < keys.size(); ++i) {
        if (keys[i] >= kPrompt - kWindow) continue;
        c.push_back(keys[i]);
        fused.push_back((kEta * window[keys[i]] + step[i]) / (kEta + 1.0));
      }
      heads.push_back(testing::max_pool(fused, kKernel));
      candidates.push_back(c);
    }
    const std::vector<int64_t> n = counts(base, heads, kBudget - kWindow);
    out.emplace_back();
    for (int64_t g = 0; g < kShape.n_head_kv; ++g) {
      Positions kept;
      for (int32_t i : best(heads[g], n[g])) kept.push_back(candidates[g][i]);
      out.back().push_back(united(kept, span(kPrompt - kWindow, kPrompt + 1)));
    }
  }
  return out;
}

// A pool holding the whole prompt cuts nothing: the kept set and the tokens are pool=all's.
TEST(DeferKvPool, APoolAsLargeAsThePromptKeepsWhatPoolAllKeeps) {
  for (const std::string base : {"snapkv", "adakv"}) {
    for (int64_t d : {1, 2}) {
      const std::string spec = "deferkv:d=" + std::to_string(d) + ",base=" + base;
      const testing::PressRun all = run(spec + ",pool=all", d);
      for (const std::string pool : {"160", "3x"}) {  // 3 x 72 = 216 >= 160
        SCOPED_TRACE(spec + ",pool=" + pool);
        const testing::PressRun pooled = run(spec + ",pool=" + pool, d);
        EXPECT_EQ(pooled.positions, all.positions);
        EXPECT_EQ(pooled.generated, all.generated);
      }
    }
  }
}

// A pool smaller than the prompt: after the prefill each head holds exactly the reference
// pool; after step 1, exactly the reference choice from it, every kept entry in the pool.
// Mutant seen failing: pool_layer returning at once (the pool ignored) fails every check.
TEST(DeferKvPool, ASmallPoolIsTheWindowsChoiceAndStepDChoosesFromIt) {
  for (const std::string base : {"snapkv", "adakv"}) {
    for (const int64_t pool : {base == "snapkv" ? 96 : 120}) {  // one pool each: the test stays quick
      const std::string spec = "deferkv:d=1,base=" + base + ",pool=" + std::to_string(pool);
      SCOPED_TRACE(spec);
      const Kept want_pool = reference_pool(base, pool, 8);  // pool_ahead's default
      EXPECT_EQ(run(spec, 0).positions, want_pool);
      const testing::PressRun after = run(spec, 1);
      const testing::PressRun all = run("deferkv:d=1,base=" + base, 1);
      // The prefill's logits are the full cache's: y_1 is pool=all's (y_2 decodes on the pool).
      ASSERT_FALSE(after.generated.empty());
      EXPECT_EQ(after.generated[0], all.generated[0]);
      EXPECT_EQ(after.positions, reference_choice(base, want_pool, after.generated[0]));
      bool outside = false;  // pool=all keeps some entry outside the pool (so the pool matters)
      for (int64_t l = 0; l < kLayers; ++l) {
        for (int64_t g = 0; g < kShape.n_head_kv; ++g) {
          for (int32_t p : after.positions[l][g]) {
            if (p < kPrompt) EXPECT_TRUE(std::binary_search(want_pool[l][g].begin(), want_pool[l][g].end(), p));
          }
          for (int32_t p : all.positions[l][g]) {
            outside |= !std::binary_search(want_pool[l][g].begin(), want_pool[l][g].end(), p) && p < kPrompt;
          }
        }
      }
      EXPECT_TRUE(outside);
    }
  }
}

// pool_ahead=n: each candidate's pool score is the highest window score of itself and the n
// candidates before it, so the entries after the ones the window reads (the continuation
// the first decode steps copy) come into the pool. Mutant seen failing: pool_score ignoring
// pool_ahead (the pool is then the plain window's, which this test shows differs).
TEST(DeferKvPool, PoolAheadCarriesEachWindowScoreToTheEntriesAfterIt) {
  for (const std::string base : {"snapkv", "adakv"}) {
    const std::string spec = "deferkv:d=2,base=" + base + ",pool=96,pool_ahead=";
    SCOPED_TRACE(spec);
    const Kept want = reference_pool(base, 96, 5);
    EXPECT_NE(want, reference_pool(base, 96, 0));
    EXPECT_EQ(run(spec + "5", 0).positions, want);
    EXPECT_EQ(run(spec + "0", 0).positions, reference_pool(base, 96, 0));
  }
}

// The pool is ScoredPress's, for any scorer with a deferred trigger: SnapKV deferred to step 2
// is cut to the same window-scored pool (its own score at the prompt's end), keeps only pool
// entries, and with a pool of the whole prompt keeps what it keeps without one.
TEST(DeferKvPool, AnyDeferredScorerTakesThePool) {
  const Kept want_pool = reference_pool("snapkv", 96);
  EXPECT_EQ(run("snapkv:d=2,pool=96", 0).positions, want_pool);
  const testing::PressRun after = run("snapkv:d=2,pool=96", 2);
  for (int64_t l = 0; l < kLayers; ++l) {
    for (int64_t g = 0; g < kShape.n_head_kv; ++g) {
      const Positions& kept = after.positions[l][g];
      EXPECT_EQ(static_cast<int64_t>(kept.size()), kBudget + 2);
      for (int32_t p : kept) {
        if (p < kPrompt) EXPECT_TRUE(std::binary_search(want_pool[l][g].begin(), want_pool[l][g].end(), p));
      }
    }
  }
  EXPECT_EQ(run("snapkv:d=2,pool=160", 2).positions, run("snapkv:d=2", 2).positions);
}

// The peak the session measures: the last layer's whole prompt beside the other layers'
// pools; the batch engine's projection counts every layer's pool (one layer's more).
TEST(DeferKvPool, PeakIsOneLayersPromptBesideThePoolsAsProjected) {
  constexpr int64_t kPool = 96;
  const testing::PressRun r = run("deferkv:d=2,pool=" + std::to_string(kPool), 2);
  const KvStats stats = r.session->kv_stats();
  const int64_t entry = stats.bytes_per_entry, heads = kShape.n_head_kv;
  EXPECT_EQ(stats.peak_bytes, kPrompt * heads * entry + (kLayers - 1) * kPool * heads * entry);
  EXPECT_EQ(r.session->press()->holding(press_shape(r.session->model().config()), kPrompt).pool, kPool);
  const KvProjection p = project_kv(entry * heads * kLayers, kLayers, kPrompt, 2, kBudget,
                                    r.session->press()->points().evicts_each_prompt_layer(),
                                    r.session->press()->holding(press_shape(r.session->model().config()), kPrompt).pool);
  EXPECT_EQ(p.peak_bytes, stats.peak_bytes + kPool * heads * entry);
  EXPECT_EQ(p.after_pool, kPool * heads * entry * kLayers);
  EXPECT_EQ(p.after_eviction, (kBudget + 2) * heads * entry * kLayers);
  EXPECT_EQ(stats.bytes, (kBudget + 2) * heads * entry * kLayers);  // after step 2: b + the 2 tokens
  // pool=all: the whole prompt in every layer until step d.
  const testing::PressRun all = run("deferkv:d=2,pool=all", 2);
  EXPECT_GE(all.session->kv_stats().peak_bytes, kLayers * (kPrompt + 1) * heads * entry);
  EXPECT_EQ(all.session->press()->holding(press_shape(r.session->model().config()), kPrompt).pool, -1);
}

TEST(DeferKvPool, BadPoolsAreRefusedByName) {
  const auto refused = [](const std::string& spec, const std::string& words) {
    const std::string error = testing::press_error(spec, KvBudget::per_head(64));
    EXPECT_NE(error.find(words), std::string::npos) << spec << ": " << error;
  };
  for (const std::string bad : {"0", "junk", "0.5x", "x", "-4", "4xx", "1.5"}) {
    refused("deferkv:pool=" + bad, "pool=" + bad + " is not a pool");
  }
  refused("deferkv:pool=32", "pool=32 is below the budget of 64 entries per KV head");
  refused("snapkv:pool=4x", "it needs d > 0");
  refused("snapkv:per_step=true,pool=4x", "it needs d > 0");
  refused("snapkv:d=2,alloc=per_layer,ratios=0.5/0.5/0.5/0.5,pool=4x", "cannot take a candidate pool");
  EXPECT_EQ(testing::press_error("snapkv:d=2,pool=4x"), "");
  EXPECT_EQ(testing::press_error("deferkv:pool=64"), "");  // the budget itself
  EXPECT_EQ(testing::press_error("deferkv:pool=2.5x"), "");
  EXPECT_EQ(make_press("deferkv:pool=2.5x", KvBudget::per_head(64))->holding(PressModelShape{}, 1000).pool, 160);
  EXPECT_EQ(make_press("deferkv:pool=4x", KvBudget::ratio(0.5))->holding(PressModelShape{}, 1000).pool, 2000);
}

}  // namespace
}  // namespace deferkv
