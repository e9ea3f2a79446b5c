// The forward pass with every KV-cache storage type against the double-precision
// reference, through batched prefill and decode.
#include <gtest/gtest.h>

#include <cmath>

#include "base/thread_pool.h"
#include "support/error_of.h"
#include "deferkv/session.h"
#include "kv/kv_cache_type.h"
#include "model/reference_forward.h"
#include "model/test_models.h"

namespace deferkv {
namespace {

using testing::reference_logits;
using testing::relative_l2;

const std::vector<int32_t> kTokens = {1, 403, 407, 261, 378, 432, 383, 286, 261, 376, 298, 315, 17, 99, 5, 230};
constexpr int64_t kPrefill = 10, kBatch = 4;  // prefill in batches of 4 (4, 4, 2), then 6 decode steps

// F32 weights, so the cache's rounding is the only rounding beyond float32 arithmetic;
// head_dim 64 is two quantised blocks per head. GQA: 4 query heads on 2 KV heads.
std::string model_path() {
  RandomModelSpec s;
  s.weight_type = DType::F32;
  s.n_embd = 256;
  s.n_layer = 2;
  s.n_head = 4;
  s.n_head_kv = 2;
  s.n_ff = 512;
  return testing::random_model_path(s);
}

// Relative error of the logits against the unrounded reference that each type's rounding
// allows. A stored value carries a relative error of about u: f16 2^-11, bf16 2^-8
// (half an ulp); q8_0 half a step of absmax/127 and q4_0 half a step of absmax/8, where
// absmax over a block of 32 Gaussian values is about 2.5 of their RMS, so u = 2.5/254
// and 2.5/16 (the worst case; the RMS is a third of it). The logits of this two-layer
// model carry that error attenuated, never amplified beyond it; the bound is the worst
// case u (plus float32's 1e-4), so a kernel that read the wrong rows or a wrong scale
// (errors of order 1) cannot pass, and f16 is held 100x tighter than q4_0.
double unrounded_tolerance(DType type) {
  switch (type) {
    case DType::F32: return 1e-4;
    case DType::F16: return 1e-4 + 0x1p-11;
    case DType::BF16: return 1e-4 + 0x1p-8;
    case DType::Q8_0: return 1e-4 + 2.5 / 254;
    case DType::Q4_0: return 1e-4 + 2.5 / 16;
    default: return 0;
  }
}

// Against the reference that stores the same rounded rows, only float32 arithmetic and
// the rare value whose float32 projection rounds across a quantisation boundary differ.
double rounded_tolerance(DType type) { return type == DType::Q4_0 || type == DType::Q8_0 ? 1e-3 : 1e-4; }

void check(const std::string& path, DType type, const std::vector<std::vector<double>>& expected, double tol) {
  auto model = Model::load(path);
  SessionOptions options;
  options.n_ctx = 64;
  options.n_batch = kBatch;
  options.all_logits = true;
  options.cache_type_k = options.cache_type_v = kv_cache_type_name(type);
  Session session(model, std::make_shared<ThreadPool>(2), options);
  session.prefill(std::vector<int32_t>(kTokens.begin(), kTokens.begin() + kPrefill));
  const int64_t n_vocab = model->config().n_vocab;
  for (int64_t t = 0; t < kPrefill; ++t) {
    EXPECT_LT(relative_l2(session.logits().data() + t * n_vocab, expected[t]), tol) << "prompt position " << t;
  }
  for (size_t t = kPrefill; t < kTokens.size(); ++t) {
    session.decode(kTokens[t]);
    EXPECT_LT(relative_l2(session.last_logits(), expected[t]), tol) << "decode position " << t;
  }
}

class ForwardCacheTypes : public ::testing::TestWithParam<DType> {};

TEST_P(ForwardCacheTypes, MatchesTheReferenceThatStoresTheSameRoundedRows) {
  const std::string path = model_path();
  check(path, GetParam(), reference_logits(path, kTokens, {}, testing::rounded_as(GetParam(), 64)), rounded_tolerance(GetParam()));
}

TEST_P(ForwardCacheTypes, StaysWithinTheTypesRoundingOfTheUnroundedReference) {
  const std::string path = model_path();
  check(path, GetParam(), reference_logits(path, kTokens), unrounded_tolerance(GetParam()));
}

INSTANTIATE_TEST_SUITE_P(EveryType, ForwardCacheTypes,
                         ::testing::Values(DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0),
                         [](const auto& info) { return kv_cache_type_name(info.param); });

TEST(ForwardCacheTypes, SessionRejectsUnknownTypesAndHeadsThatBlocksDoNotTile) {
  RandomModelSpec s;
  s.n_embd = 80;  // head_dim 20 with 4 heads
  s.n_layer = 1;
  s.n_head = 4;
  s.n_head_kv = 2;
  s.n_ff = 64;
  auto model = Model::load(testing::random_model_path(s));
  SessionOptions options;
  const auto session_error = [&] {
    return testing::error_of([&] { Session(model, std::make_shared<ThreadPool>(1), options); });
  };
  options.cache_type_k = "q8_0";
  std::string message = session_error();
  EXPECT_NE(message.find("key cache type q8_0"), std::string::npos) << message;
  EXPECT_NE(message.find("head_dim is 20"), std::string::npos) << message;
  options.cache_type_k = "f16";
  options.cache_type_v = "q5_1";
  message = session_error();
  EXPECT_NE(message.find("unknown KV cache type 'q5_1'"), std::string::npos) << message;
}

}  // namespace
}  // namespace deferkv
