// CompressKV's calibration on the embedded model: the profile it writes is complete and
// drives the press; a model that does not retrieve is told so.
#include "eval/calibration/compresskv_calibration.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "base/thread_pool.h"
#include "deferkv/error.h"
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
