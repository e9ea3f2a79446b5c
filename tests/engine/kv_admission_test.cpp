// Admission by KV bytes: the projection of what a request holds, and the reservations.
#include <gtest/gtest.h>

#include "engine/kv_admission.h"

namespace deferkv {
namespace {

// Hand-computed: 100 bytes a token over 10 layers, a 50-token prompt, 10 new tokens.
TEST(KvProjection, FullCacheHoldsPromptAndOutput) {
  const KvProjection p = project_kv(100, 10, 50, 10, -1, false);
  EXPECT_EQ(p.peak_bytes, 6000);
  EXPECT_EQ(p.after_eviction, 6000);
}

TEST(KvProjection, APressHoldsThePromptUntilItEvictsThenItsBudget) {
  const KvProjection p = project_kv(100, 10, 50, 10, 8, false);
  EXPECT_EQ(p.peak_bytes, 5000);       // the whole prompt, before the eviction
  EXPECT_EQ(p.after_eviction, 1800);   // 8 kept + 10 new
  const KvProjection big = project_kv(100, 10, 50, 60, 8, false);
  EXPECT_EQ(big.peak_bytes, 6800);     // the kept entries and the output outgrow the prompt
  const KvProjection loose = project_kv(100, 10, 50, 10, 80, false);
  EXPECT_EQ(loose.after_eviction, 6000);  // a budget above the prompt keeps all of it
}

// Evicting each layer once the prompt has passed it: one layer's prompt (50 tokens x 10
// bytes) beside every layer's 8 kept entries (8 x 100 bytes), rounded up to whole bytes.
TEST(KvProjection, APressEvictingLayerByLayerHoldsOneLayersPromptBesideTheBudgets) {
  const KvProjection p = project_kv(100, 10, 50, 1, 8, true);
  EXPECT_EQ(p.peak_bytes, 500 + 800);
  EXPECT_EQ(p.after_eviction, 900);  // 8 kept + 1 new
  EXPECT_EQ(project_kv(100, 10, 50, 10, 8, true).peak_bytes, 1800);  // the output outgrows the prefill
  EXPECT_EQ(project_kv(100, 3, 50, 1, 8, true).peak_bytes, 1667 + 800);
  EXPECT_EQ(project_kv(100, 10, 50, 1, -1, true).peak_bytes, 5100);  // no press: the full cache
}

// A candidate pool of 20 entries per head (DeferKV's pool=P), budget 8: the prefill holds
// one layer's prompt (50 x 10 bytes) beside every layer's pool (20 x 100 bytes); then the
// pool (2000) until step d; then 8 kept + 1 new (900).
TEST(KvProjection, APooledPressHoldsOneLayersPromptBesideThePoolsThenThePool) {
  const KvProjection p = project_kv(100, 10, 50, 1, 8, true, 20);
  EXPECT_EQ(p.peak_bytes, 500 + 2000);
  EXPECT_EQ(p.after_pool, 2000);
  EXPECT_EQ(p.after_eviction, 900);
  // Many new tokens: the budget and the output outgrow the pool.
  const KvProjection long_output = project_kv(100, 10, 50, 30, 8, true, 20);
  EXPECT_EQ(long_output.peak_bytes, 3800);
  EXPECT_EQ(long_output.after_pool, 3800);
  // A pool holding the whole prompt cuts nothing: the whole prompt, not more.
  EXPECT_EQ(project_kv(100, 10, 50, 1, 8, true, 80).peak_bytes, 5000);
  EXPECT_EQ(project_kv(100, 10, 50, 1, 8, true, 80).after_pool, 5000);
  // Without a pool the stages are one: after_pool is after_eviction.
  EXPECT_EQ(project_kv(100, 10, 50, 1, 8, true).after_pool, 900);
  EXPECT_EQ(project_kv(100, 10, 50, 1, 8, false, 20).peak_bytes, 5000);  // not layer by layer: the whole prompt
}

TEST(KvAdmission, AdmitsWhatFitsBesideTheReserved) {
  KvAdmission a(1000);
  EXPECT_TRUE(a.fits(1000));
  a.reserve(600);
  EXPECT_FALSE(a.fits(401));
  EXPECT_TRUE(a.fits(400));
  EXPECT_TRUE(a.can_ever_fit(1000));
  EXPECT_FALSE(a.can_ever_fit(1001));
  a.release(600);
  EXPECT_EQ(a.reserved(), 0);
}

}  // namespace
}  // namespace deferkv
