// Which entries the layer- and head-level methods keep (per-layer compression ratios,
// SimLayerKV, DuoAttention), per layer and KV head, compared exactly with each rule
// (docs/methods/) evaluated in double precision on the reference forward's queries and keys.
// The model and prompt are those of kept_set_geometry_test.cpp.
//
// Mutants applied to the engine, run, seen failing, reverted (the tests that failed):
//   allocation.cpp's per_layer reads the layers' ratios top first
//      (layer_ratios[n_layer - 1 - layer])                           -> PerLayerRatios (both cases)
//   per_layer_ratio_count leaves the protected entries out of the
//      head's length (int(C (1 - r)) - reserved)                     -> PerLayerRatios (streaming_llm)
//   simlayerkv.cpp counts the window's own keys in the layer's score  -> SimLayerKv (both cases)
//   simlayerkv.cpp's lazy layer keeps the last n_recent, not
//      n_recent - n_last                                             -> SimLayerKv
//   duo_attention.cpp's score without RoPE on the repeated query and
//      keys (the mean query . mean key at every position)            -> DuoAttention
//   duo_attention.cpp's mean key from the cached keys as stored (RoPE
//      not undone)                                                   -> DuoAttention
//   duo_attention.cpp's pattern values not clipped to [0, 1]          -> DuoAttentionPattern
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "deferkv/error.h"
#include "model/reference_forward.h"
#include "model/test_models.h"
#include "press/kept_set_reference.h"
#include "press/press_test_util.h"

namespace deferkv {
namespace {

using testing::AttentionShape;
using testing::Positions;
using testing::ReferenceTrace;
using testing::Scores;
using testing::span;
using testing::united;

constexpr int64_t kPrompt = 160, kBudget = 72, kLayers = 4, kDim = 16;
const AttentionShape kShape{4, 2, kDim};

using Kept = std::vector<std::vector<Positions>>;  // [layer][KV head]

std::string model_path() { return testing::kept_set_model_path(); }
const std::vector<int32_t>& prompt() {
  static const std::vector<int32_t> p = testing::distinct_prompt(kPrompt);
  return p;
}
const ReferenceTrace& trace() { return testing::kept_set_trace(kPrompt); }

// Key of KV head g (or query of head h) at position t before RoPE.
std::vector<double> pre_rope_key(int64_t l, int64_t g, int64_t t) {
  const auto& r = trace().keys[l][t];
  return testing::rope_rotated({r.begin() + g * kDim, r.begin() + (g + 1) * kDim}, -static_cast<double>(t));
}
std::vector<double> pre_rope_query(int64_t l, int64_t h, int64_t t) {
  const auto& r = trace().queries[l][t];
  return testing::rope_rotated({r.begin() + h * kDim, r.begin() + (h + 1) * kDim}, -static_cast<double>(t));
}

double key_norm(int64_t l, int64_t g, int64_t t) {
  const auto& r = trace().keys[l][t];
  double s = 0;
  for (int64_t i = 0; i < kDim; ++i) s += r[g * kDim + i] * r[g * kDim + i];
  return std::sqrt(s);
}

// The same kept set for every head of every layer, by layer.
Kept every_head(const std::function<Positions(int64_t)>& layer) {
  Kept out;
  for (int64_t l = 0; l < kLayers; ++l) out.emplace_back(kShape.n_head_kv, layer(l));
  return out;
}

// Runs the engine's press (one decode step after the prefill's eviction) and compares.
void expect_kept(const std::string& spec, const KvBudget& budget, const Kept& expected) {
  SCOPED_TRACE(spec);
  const auto run = testing::run_press_on_model(model_path(), spec, budget, prompt(), 1);
  for (int64_t l = 0; l < kLayers; ++l) {
    for (int64_t g = 0; g < kShape.n_head_kv; ++g) {
      EXPECT_EQ(run.positions[l][g], united(expected[l][g], span(kPrompt, kPrompt + 1)))
          << "layer " << l << " KV head " << g;
    }
  }
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// ---- Per-layer compression ratios (kvpress PerLayerCompressionPress) ----

constexpr double kRatios[kLayers] = {0.2, 0.5, 0.7, 0.9};
const std::string kRatioList = "0.2/0.5/0.7/0.9";

// Layer l keeps int(T (1 - r_l)) entries per head, the protected ones among them: KNorm's
// smallest key norms (no protected entries); StreamingLLM's 4 sinks and the newest rest.
TEST(KeptSetLayers, PerLayerRatios) {
  expect_kept("knorm:alloc=per_layer,ratios=" + kRatioList, KvBudget::per_head(kBudget), [] {
    Kept out;
    for (int64_t l = 0; l < kLayers; ++l) {
      const auto keep = static_cast<int64_t>(kPrompt * (1.0 - kRatios[l]));
      auto& layer = out.emplace_back();
      for (int64_t g = 0; g < kShape.n_head_kv; ++g) {
        Scores s;
        for (int64_t t = 0; t < kPrompt; ++t) s.push_back(-key_norm(l, g, t));
        layer.push_back(testing::best(s, keep));
      }
    }
    return out;
  }());
  expect_kept("streaming_llm:alloc=per_layer,ratios=" + kRatioList, KvBudget::ratio(0.5), every_head([](int64_t l) {
                const auto keep = static_cast<int64_t>(kPrompt * (1.0 - kRatios[l]));
                return united(span(0, 4), span(kPrompt - (keep - 4), kPrompt));
              }));
}

TEST(KeptSetLayers, PerLayerRatiosRefusedUnlessOnePerLayer) {
  const std::string three =
      error_of([] { testing::run_press_on_model(model_path(), "knorm:alloc=per_layer,ratios=0.2/0.5/0.7",
                                                KvBudget::per_head(kBudget), prompt(), 1); });
  EXPECT_NE(three.find("ratios= gives 3 compression ratios; this model has 4 layers"), std::string::npos) << three;
  const auto made = [](const std::string& spec) {
    return error_of([&] { make_press(spec, KvBudget::per_head(kBudget)); });
  };
  EXPECT_NE(made("knorm:alloc=per_layer").find("alloc=per_layer needs ratios="), std::string::npos);
  EXPECT_NE(made("knorm:ratios=0.5/0.5").find("ratios= is read by alloc=per_layer only"), std::string::npos);
  EXPECT_NE(made("knorm:alloc=per_layer,ratios=0.2/1/0.3/0.1").find("got '1' in '0.2/1/0.3/0.1'"), std::string::npos);
  EXPECT_NE(made("knorm:alloc=per_layer,ratios=0.2//0.3/0.1").find("got '' in"), std::string::npos);
  EXPECT_NE(made("deferkv:base=per_layer").find("base=per_layer needs ratios="), std::string::npos);
  EXPECT_NE(made("knorm:alloc=per_layer,ratios=0.5/0.5/0.5/0.5,every=4").find("it cannot take per_step or every"),
            std::string::npos);
  EXPECT_NE(made("tova:alloc=per_layer,ratios=0.5/0.5/0.5/0.5").find("it cannot take per_step or every"),
            std::string::npos);
}

// ---- SimLayerKV ----

// kvpress's is_lazy: the mean over every query head and the last n_last queries of their
// attention to the first T - n_last entries, summed over the first n_initial and the last
// n_recent of those.
double laziness(int64_t l, int64_t n_last, int64_t n_recent, int64_t n_initial) {
  double score = 0;
  for (int64_t t = kPrompt - n_last; t < kPrompt; ++t) {
    for (int64_t h = 0; h < kShape.n_head; ++h) {
      const Scores p = testing::attention_row(trace(), kShape, l, h, t);
      for (int64_t j = 0; j < kPrompt - n_last; ++j) {
        if (j < n_initial || j >= kPrompt - n_last - n_recent) score += p[j] / double(kShape.n_head * n_last);
      }
    }
  }
  return score;
}

TEST(KeptSetLayers, SimLayerKv) {
  for (const auto& [n_last, n_recent, n_initial] : std::vector<std::array<int64_t, 3>>{{1, 40, 4}, {3, 24, 2}}) {
    Scores scores;
    for (int64_t l = 0; l < kLayers; ++l) scores.push_back(laziness(l, n_last, n_recent, n_initial));
    // The threshold in the widest gap between two layers' scores: some layers lazy, some not.
    Scores sorted = scores;
    std::sort(sorted.begin(), sorted.end());
    size_t cut = 1;
    for (size_t i = 1; i < sorted.size(); ++i) {
      if (sorted[i] - sorted[i - 1] > sorted[cut] - sorted[cut - 1]) cut = i;
    }
    ASSERT_GT(sorted[cut] - sorted[cut - 1], 1e-4);
    const double threshold = (sorted[cut] + sorted[cut - 1]) / 2;
    const std::string spec = "simlayerkv:lazy_threshold=" + std::to_string(threshold) + ",n_last=" +
                             std::to_string(n_last) + ",n_recent=" + std::to_string(n_recent) +
                             ",n_initial=" + std::to_string(n_initial);
    expect_kept(spec, KvBudget::per_head(kBudget), every_head([&](int64_t l) {
                  if (scores[l] <= std::stod(std::to_string(threshold))) return span(0, kPrompt);
                  return united(span(0, n_initial), span(kPrompt - n_recent + n_last, kPrompt));
                }));
  }
  // kvpress's default threshold of 1 finds no lazy layer.
  expect_kept("simlayerkv:n_recent=40", KvBudget::per_head(kBudget),
              every_head([](int64_t) { return span(0, kPrompt); }));
  const auto made = [](const std::string& spec) { return error_of([&] { make_press(spec, {}); }); };
  EXPECT_NE(made("simlayerkv:n_recent=2,n_last=3").find("n_recent=2 must be at least n_last=3"), std::string::npos);
  EXPECT_NE(made("simlayerkv:lazy_threshold=1.5").find("lazy_threshold=1.5 is out of range"), std::string::npos);
}

// ---- DuoAttention ----

// kvpress's on-the-fly score of KV head g in layer l, the means taken over the prompt: the
// mean pre-RoPE query of each of g's query heads at position q_len - 1 against the mean
// pre-RoPE key at 0 .. q_len - 1, softmax scaled by 1/sqrt(d), the mean of its cumulative
// sum, averaged over the query heads.
double duo_score(int64_t l, int64_t g, int64_t q_len) {
  std::vector<double> k(kDim, 0.0);
  for (int64_t t = 0; t < kPrompt; ++t) {
    const auto kt = pre_rope_key(l, g, t);
    for (int64_t i = 0; i < kDim; ++i) k[i] += kt[i] / kPrompt;
  }
  double score = 0;
  for (int64_t h = g * kShape.group(); h < (g + 1) * kShape.group(); ++h) {
    std::vector<double> q(kDim, 0.0);
    for (int64_t t = 0; t < kPrompt; ++t) {
      const auto qt = pre_rope_query(l, h, t);
      for (int64_t i = 0; i < kDim; ++i) q[i] += qt[i] / kPrompt;
    }
    const auto q_last = testing::rope_rotated(q, static_cast<double>(q_len - 1));
    Scores logits;
    for (int64_t j = 0; j < q_len; ++j) {
      const auto kj = testing::rope_rotated(k, static_cast<double>(j));
      double dot = 0;
      for (int64_t i = 0; i < kDim; ++i) dot += q_last[i] * kj[i];
      logits.push_back(dot / std::sqrt(double(kDim)));
    }
    const double max = *std::max_element(logits.begin(), logits.end());
    double total = 0;
    for (double& z : logits) total += (z = std::exp(z - max));
    double cumulative = 0, area = 0;
    for (double z : logits) area += (cumulative += z / total);
    score += area / static_cast<double>(q_len) / static_cast<double>(kShape.group());
  }
  return score;
}

// The `streaming` lowest of the (layer, KV head) scores (ties to the lower layer, then head)
// keep [0, sink) and the newest `recent`; the others everything.
Kept duo_kept(const std::vector<Scores>& scores, int64_t streaming, int64_t sink, int64_t recent) {
  std::vector<std::pair<double, int64_t>> order;
  for (int64_t l = 0; l < kLayers; ++l) {
    for (int64_t g = 0; g < kShape.n_head_kv; ++g) order.push_back({scores[l][g], l * kShape.n_head_kv + g});
  }
  std::sort(order.begin(), order.end());
  Kept out(kLayers, std::vector<Positions>(kShape.n_head_kv, span(0, kPrompt)));
  for (int64_t i = 0; i < streaming; ++i) {
    const int64_t l = order[i].second / kShape.n_head_kv, g = order[i].second % kShape.n_head_kv;
    out[l][g] = united(span(0, sink), span(kPrompt - recent, kPrompt));
  }
  return out;
}

TEST(KeptSetLayers, DuoAttention) {
  for (const int64_t q_len : {500, 64}) {
    std::vector<Scores> scores(kLayers);
    Scores all;
    for (int64_t l = 0; l < kLayers; ++l) {
      for (int64_t g = 0; g < kShape.n_head_kv; ++g) all.push_back(scores[l].emplace_back(duo_score(l, g, q_len)));
    }
    std::sort(all.begin(), all.end());
    for (size_t i = 1; i < all.size(); ++i) ASSERT_GT(all[i] - all[i - 1], 1e-5) << "q_len " << q_len;
    const std::string q = ",q_len=" + std::to_string(q_len);
    // head_compression_ratio 0.5: round(8 * 0.5) = 4 streaming heads.
    expect_kept("duo_attention:head_compression_ratio=0.5,sink_size=4,recent_size=16" + q, KvBudget::per_head(kBudget),
                duo_kept(scores, 4, 4, 16));
    // The run's kv_ratio as the share: round(8 * 0.3125) = round(2.5) = 2 (half to even, as Python).
    expect_kept("duo_attention:sink_size=8,recent_size=24" + q, KvBudget::ratio(0.3125), duo_kept(scores, 2, 8, 24));
  }
  EXPECT_NE(error_of([] { make_press("duo_attention", KvBudget::per_head(kBudget)); })
                .find("needs head_compression_ratio=R (the share of streaming heads) or a kv_ratio"),
            std::string::npos);
}

std::string pattern_dir(const std::string& name, const std::string& config, const std::string& tsv) {
  const std::string dir = ::testing::TempDir() + "/duo_pattern_" + name;
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/config.json") << config;
  std::ofstream(dir + "/full_attention_heads.tsv") << tsv;
  return dir;
}

// DuoAttention's published format: the values clipped to [0, 1] before they are ranked, so
// 1.5 and 1.2 tie at 1 and the lower layer streams first; sink_size and recent_size come
// from the pattern's config.
TEST(KeptSetLayers, DuoAttentionPattern) {
  const std::string dir = pattern_dir("ok", R"({"sink_size": 4, "recent_size": 8, "lr": 0.02})",
                                      "0.9\t1.5\n0.1\t1.2\n-0.3\t0.5\n0.05\t0.7\n");
  const std::vector<Scores> clipped = {{0.9, 1.0}, {0.1, 1.0}, {0.0, 0.5}, {0.05, 0.7}};
  expect_kept("duo_attention:head_compression_ratio=0.875,pattern=" + dir, KvBudget::per_head(kBudget),
              duo_kept(clipped, 7, 4, 8));
  const std::string wrong = pattern_dir("three_layers", R"({"sink_size": 4, "recent_size": 8})", "1\t0\n1\t0\n1\t0\n");
  const std::string e = error_of([&] {
    testing::run_press_on_model(model_path(), "duo_attention:head_compression_ratio=0.5,pattern=" + wrong,
                                KvBudget::per_head(kBudget), prompt(), 1);
  });
  EXPECT_NE(e.find("the pattern has 3 layers of 2 KV heads; this model has 4 layers of 2"), std::string::npos) << e;
  const std::string bad = pattern_dir("bad_config", R"({"sink_size": 4.5, "recent_size": 8})", "1\t0\n");
  EXPECT_NE(error_of([&] { make_press("duo_attention:head_compression_ratio=0.5,pattern=" + bad, {}); })
                .find("needs sink_size as a whole number"),
            std::string::npos);
  const std::string nan = pattern_dir("bad_value", R"({"sink_size": 4, "recent_size": 8})", "1\tx\n");
  EXPECT_NE(error_of([&] { make_press("duo_attention:head_compression_ratio=0.5,pattern=" + nan, {}); })
                .find("'x' is not a number"),
            std::string::npos);
}

}  // namespace
}  // namespace deferkv
