// CompressKV's calibration on the embedded model: its head and layer scores equal the
// method's formulas on attention from the f64 reference forward, the profile it writes is
// complete and drives the press; a model that does not retrieve is told so.
#include "eval/calibration/compresskv_calibration.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>

#include "base/thread_pool.h"
#include "deferkv/error.h"
#include "deferkv/eval_tasks.h"
#include "deferkv/tokenizer.h"
#include "model/reference_forward.h"
#include "model/test_models.h"
#include "tensor/gguf_test_util.h"

namespace deferkv::eval {
namespace {

CompressKvCalibrationOptions small_probes() {
  CompressKvCalibrationOptions o;
  o.lengths = {300};
  o.depths = {20, 80};
  o.max_new_tokens = 12;
  return o;
}

TEST(CompressKvCalibration, AModelThatDoesNotRetrieveIsAClearError) {
  auto model = Model::load(testing::stories_model_path());
  SessionOptions options;
  options.n_ctx = 400;
  Session session(model, std::make_shared<ThreadPool>(2), options);
  try {
    calibrate_compresskv(session, small_probes());
    FAIL() << "stories260K answered a needle probe";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("none of the 2 probes was answered"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("--probes ruler"), std::string::npos) << e.what();
  }
}

// Both scores recomputed from the f64 reference forward's queries, keys and values, softmax
// and the method's formulas by hand (header of compresskv_calibration.h), on the prompts and
// the greedy continuations the calibration decodes. The f32 cache keeps the engine's
// attention within float rounding of the reference. (Mutants checked: the needle span one
// token longer fails the head scores; the retrieval heads listed worst first fails their
// order; the restricted output left unrenormalised fails the layer scores.)
TEST(CompressKvCalibration, ScoresEqualTheFormulasOnReferenceAttention) {
  const std::string path = testing::stories_model_path();
  auto model = Model::load(path);
  const ModelConfig& c = model->config();
  const Tokenizer& tokenizer = model->tokenizer();
  SessionOptions options;
  options.n_ctx = 400;
  options.cache_type_k = options.cache_type_v = "f32";
  Session session(model, std::make_shared<ThreadPool>(1), options);
  auto o = small_probes();
  o.min_recall = -1;  // every probe counts: the embedded model cannot retrieve
  o.first_k = 2;
  const auto result = calibrate_compresskv(session, o);
  ASSERT_EQ(result.answered, 2);

  const int64_t group = c.n_head / c.n_head_kv, d = c.head_dim;
  const std::string needle_text(niah_needle());
  const auto needle = tokenizer.encode(needle_text.substr(needle_text.find_first_not_of('\n')), false, false);
  const auto n = static_cast<int64_t>(needle.size());
  TaskGenerator generator(tokenizer, TaskOptions{});
  std::vector<std::vector<double>> head_scores(static_cast<size_t>(c.n_layer), std::vector<double>(c.n_head, 0.0));
  std::vector<double> error(static_cast<size_t>(c.n_layer), 0.0);
  double weight = 0;  // total copies weight: the head scores must not be zero everywhere
  for (double depth : o.depths) {
    const TaskSample sample = generator.niah(300, depth);
    const std::vector<int32_t> prompt(sample.tokens.begin(), sample.tokens.end());
    const auto t = static_cast<int64_t>(prompt.size());
    // The needle's span: the first window of its length holding > 90% of its distinct tokens.
    const std::set<int32_t> wanted(needle.begin(), needle.end());
    int64_t n0 = -1;
    for (int64_t start = 0; n0 < 0 && start + n <= t; ++start) {
      std::set<int32_t> seen;
      for (int64_t j = start; j < start + n; ++j) {
        if (wanted.count(prompt[j]) > 0) seen.insert(prompt[j]);
      }
      if (static_cast<double>(seen.size()) > 0.9 * static_cast<double>(wanted.size())) n0 = start;
    }
    ASSERT_GE(n0, 0);
    // The greedy continuation: up to max_new_tokens, ending at end of generation or after a newline.
    Session greedy(model, std::make_shared<ThreadPool>(1), options);
    greedy.prefill(prompt);
    std::vector<int32_t> generated;
    for (int64_t i = 0; i < o.max_new_tokens; ++i) {
      const float* logits = greedy.last_logits();
      const auto token = static_cast<int32_t>(std::max_element(logits, logits + c.n_vocab) - logits);
      if (tokenizer.is_end_of_generation(token)) break;
      generated.push_back(token);
      if (tokenizer.token_piece(token).find('\n') != std::string::npos) break;
      greedy.decode(token);
    }
    std::vector<int32_t> tokens = prompt;
    tokens.insert(tokens.end(), generated.begin(), generated.end());
    const testing::ReferenceTrace trace = testing::reference_trace(path, tokens, testing::ReferenceRows{});
    // Attention of the query at position p over keys 0..p in (layer, head).
    auto attention = [&](int64_t p, int64_t l, int64_t h) {
      std::vector<double> a(static_cast<size_t>(p + 1));
      double top = -1e300, total = 0;
      for (int64_t j = 0; j <= p; ++j) {
        double dot = 0;
        for (int64_t x = 0; x < d; ++x) dot += trace.queries[l][p][h * d + x] * trace.keys[l][j][(h / group) * d + x];
        top = std::max(top, a[j] = dot / std::sqrt(static_cast<double>(d)));
      }
      for (double& v : a) total += v = std::exp(v - top);
      for (double& v : a) v /= total;
      return a;
    };

    // A. The query that chooses generated token i sits at t - 1 + i; its head's mass on the
    // needle span counts once per copy of that token in the span.
    for (size_t i = 0; i < generated.size(); ++i) {
      const auto copies = static_cast<double>(std::count(prompt.begin() + n0, prompt.begin() + n0 + n, generated[i]));
      weight += copies;
      for (int64_t l = 0; l < c.n_layer; ++l) {
        for (int64_t h = 0; h < c.n_head; ++h) {
          const auto a = attention(t - 1 + static_cast<int64_t>(i), l, h);
          double mass = 0;
          for (int64_t j = n0; j < n0 + n; ++j) mass += a[j];
          head_scores[l][h] += copies * mass / static_cast<double>(o.depths.size());
        }
      }
    }

    // B. Per layer: the retrieval heads' mean attention from the last 8 prompt queries,
    // average-pooled (kernel 5, sums over the kernel's in-range entries divided by 5), top
    // 24 of the entries before that window, plus the window and every generated token.
    // Each decode query's heads, full against restricted (renormalised) output.
    // A newline ends the continuation before it is decoded.
    auto decoded = static_cast<int64_t>(generated.size());
    if (decoded > 0 && tokenizer.token_piece(generated.back()).find('\n') != std::string::npos) --decoded;
    for (int64_t l = 0; l < c.n_layer; ++l) {
      const auto& heads = result.profile.retrieval_heads[l];
      std::vector<double> window(static_cast<size_t>(t), 0.0);
      for (int64_t q = t - 8; q < t; ++q) {
        for (int64_t h : heads) {
          const auto a = attention(q, l, h);
          for (int64_t j = 0; j <= q; ++j) window[j] += a[j] / static_cast<double>(heads.size());
        }
      }
      std::vector<std::pair<float, int64_t>> pooled;
      for (int64_t j = 0; j < t - 8; ++j) {
        double sum = 0;
        for (int64_t i = std::max<int64_t>(0, j - 2); i <= std::min(t - 9, j + 2); ++i) sum += static_cast<float>(window[i]);
        pooled.emplace_back(static_cast<float>(sum / 5), j);
      }
      std::sort(pooled.begin(), pooled.end(), [](auto a, auto b) { return a.first != b.first ? a.first > b.first : a.second < b.second; });
      std::vector<char> kept(static_cast<size_t>(t), 0);
      for (int64_t i = 0; i < 24; ++i) kept[pooled[i].second] = 1;
      for (int64_t j = t - 8; j < t; ++j) kept[j] = 1;
      for (int64_t p = t; p < t + decoded; ++p) {
        double diff = 0, norm = 0;
        for (int64_t h = 0; h < c.n_head; ++h) {
          const auto a = attention(p, l, h);
          std::vector<double> full(static_cast<size_t>(d), 0.0), cut(static_cast<size_t>(d), 0.0);
          double kept_mass = 0;
          for (int64_t j = 0; j <= p; ++j) {
            const bool keep = j >= t || kept[j] != 0;
            kept_mass += keep ? a[j] : 0;
            for (int64_t x = 0; x < d; ++x) {
              full[x] += a[j] * trace.values[l][j][(h / group) * d + x];
              if (keep) cut[x] += a[j] * trace.values[l][j][(h / group) * d + x];
            }
          }
          for (int64_t x = 0; x < d; ++x) {
            diff += std::pow(cut[x] / kept_mass - full[x], 2);
            norm += full[x] * full[x];
          }
        }
        error[l] += std::sqrt(diff) / (std::sqrt(norm) + 1e-5);
      }
    }
  }
  ASSERT_GT(weight, 0) << "no generated token is in the needle: the head scores would be zero everywhere";
  double total_error = 0;
  for (double e : error) total_error += e;
  ASSERT_GT(total_error, 0);
  for (int64_t l = 0; l < c.n_layer; ++l) {
    // The retrieval heads: the layer's first_k best by the reference scores, best first.
    std::vector<int64_t> best(static_cast<size_t>(c.n_head));
    std::iota(best.begin(), best.end(), 0);
    std::stable_sort(best.begin(), best.end(), [&](int64_t a, int64_t b) { return head_scores[l][a] > head_scores[l][b]; });
    best.resize(static_cast<size_t>(o.first_k));
    EXPECT_EQ(result.profile.retrieval_heads[l], best) << "layer " << l;
    for (int64_t h = 0; h < c.n_head; ++h) {
      EXPECT_NEAR(result.head_scores[l][h], head_scores[l][h], 1e-5 * (1 + head_scores[l][h])) << "layer " << l << " head " << h;
    }
    EXPECT_NEAR(result.profile.layer_scores[l], error[l] / total_error, 1e-5) << "layer " << l;
  }
}

TEST(CompressKvCalibration, ProfileRoundTripsAndDrivesThePress) {
  auto model = Model::load(testing::stories_model_path());
  SessionOptions options;
  options.n_ctx = 400;
  Session session(model, std::make_shared<ThreadPool>(2), options);
  auto o = small_probes();
  o.min_recall = -1;  // count every probe: the embedded model cannot retrieve
  o.first_k = 3;
  const auto result = calibrate_compresskv(session, o);
  EXPECT_EQ(result.probes, 2);
  EXPECT_EQ(result.answered, 2);
  const CompressKvProfile& p = result.profile;
  ASSERT_EQ(p.n_layer, model->config().n_layer);
  ASSERT_EQ(p.retrieval_heads.size(), static_cast<size_t>(p.n_layer));
  for (size_t l = 0; l < p.retrieval_heads.size(); ++l) {
    ASSERT_EQ(p.retrieval_heads[l].size(), 3u);
    // Best first: the scores of the listed heads do not increase.
    const auto& s = result.head_scores[l];
    EXPECT_GE(s[p.retrieval_heads[l][0]], s[p.retrieval_heads[l][1]]);
    EXPECT_GE(s[p.retrieval_heads[l][1]], s[p.retrieval_heads[l][2]]);
  }
  EXPECT_NEAR(std::accumulate(p.layer_scores.begin(), p.layer_scores.end(), 0.0), 1.0, 1e-9);

  gguf_test::TempDir dir;  // fresh, so no earlier run's file can stand in for this one's
  const std::string path = dir.file("stories-compresskv.json");
  save_compresskv_profile(path, p);
  const CompressKvProfile loaded = load_compresskv_profile(path);
  EXPECT_EQ(loaded.retrieval_heads, p.retrieval_heads);
  EXPECT_EQ(loaded.n_head, p.n_head);

  Session pressed(model, std::make_shared<ThreadPool>(2), options);
  pressed.set_press(make_press("compresskv:profile=" + path + ",window=4", KvBudget::per_head(40)));
  std::vector<int32_t> prompt(200);
  std::iota(prompt.begin(), prompt.end(), 10);
  pressed.prefill(prompt);
  ASSERT_TRUE(pressed.last_eviction().has_value());
  // Every layer keeps its error-aware budget; together they keep 40 per head on average.
  int64_t kept = 0;
  for (int64_t e : pressed.last_eviction()->layer_entries) kept += e;
  EXPECT_EQ(kept, 40 * model->config().n_layer * model->config().n_head_kv);
}

// The embedded retrieval model answers RULER's wording, not NIAH's: RULER probes calibrate it.
// Its second 1K probe has a layer-0 head whose attention on the kept entries underflows to
// 0, which made that layer's error NaN and every layer score uniform (mutant: dividing by
// the zero mass again fails the last check).
TEST(CompressKvCalibration, RulerProbesCalibrateTheRetrievalModel) {
  auto model = Model::load(std::string(DEFERKV_SOURCE_DIR) + "/models/deferkv-retrieval-5m.gguf");
  SessionOptions options;
  options.n_ctx = 1100;
  Session session(model, std::make_shared<ThreadPool>(2), options);
  CompressKvCalibrationOptions o;
  o.probes = CalibrationProbes::kRuler;
  o.lengths = {1000};
  o.samples = 2;
  const auto result = calibrate_compresskv(session, o);
  EXPECT_EQ(result.probes, 2);
  EXPECT_EQ(result.answered, 2);  // both needles copied
  const auto& scores = result.profile.layer_scores;
  ASSERT_EQ(scores.size(), static_cast<size_t>(model->config().n_layer));
  for (double u : scores) EXPECT_TRUE(std::isfinite(u));
  EXPECT_NEAR(std::accumulate(scores.begin(), scores.end(), 0.0), 1.0, 1e-9);
  EXPECT_NE(*std::min_element(scores.begin(), scores.end()), *std::max_element(scores.begin(), scores.end()));
}

}  // namespace
}  // namespace deferkv::eval
