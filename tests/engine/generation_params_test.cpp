// The one set of checks of a generation's parameters (the server's requests and the Python
// bindings both call them): each refusal names its parameter, and the ends of each range
// are taken.
#include "deferkv/generation_params.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>

#include "deferkv/sampler.h"

namespace deferkv {
namespace {

// The parameter a check refuses; "" when it accepts.
std::string refused(const std::function<void()>& check) {
  try {
    check();
  } catch (const ParameterError& e) {
    EXPECT_NE(std::string(e.what()).find(e.param() == "messages" ? "role" : e.param()), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).find("--"), std::string::npos) << "a CLI flag in: " << e.what();
    return e.param();
  }
  return "";
}

SamplerParams sampling(float temperature, int32_t top_k, float top_p, float min_p) {
  SamplerParams s;
  s.temperature = temperature;
  s.top_k = top_k;
  s.top_p = top_p;
  s.min_p = min_p;
  return s;
}

TEST(GenerationParams, MaxTokensIsOneTo2To20) {
  EXPECT_EQ(refused([] { check_max_tokens(0); }), "max_tokens");
  EXPECT_EQ(refused([] { check_max_tokens(-1); }), "max_tokens");
  EXPECT_EQ(refused([] { check_max_tokens((1 << 20) + 1); }), "max_tokens");
  EXPECT_EQ(refused([] { check_max_tokens(0, "max_completion_tokens"); }), "max_completion_tokens");
  EXPECT_EQ(refused([] { check_max_tokens(1); }), "");
  EXPECT_EQ(refused([] { check_max_tokens(1 << 20); }), "");
}

TEST(GenerationParams, SamplingRangesNameTheirParameter) {
  EXPECT_EQ(refused([] { check_sampling(sampling(-1, 40, 0.9f, 0.05f)); }), "temperature");
  EXPECT_EQ(refused([] { check_sampling(sampling(100.5f, 40, 0.9f, 0.05f)); }), "temperature");
  EXPECT_EQ(refused([] { check_sampling(sampling(std::nanf(""), 40, 0.9f, 0.05f)); }), "temperature");
  EXPECT_EQ(refused([] { check_sampling(sampling(1, -1, 0.9f, 0.05f)); }), "top_k");
  EXPECT_EQ(refused([] { check_sampling(sampling(1, (1 << 20) + 1, 0.9f, 0.05f)); }), "top_k");
  EXPECT_EQ(refused([] { check_sampling(sampling(1, 40, 0, 0.05f)); }), "top_p");
  EXPECT_EQ(refused([] { check_sampling(sampling(1, 40, 1.5f, 0.05f)); }), "top_p");
  EXPECT_EQ(refused([] { check_sampling(sampling(1, 40, 0.9f, 1)); }), "min_p");
  EXPECT_EQ(refused([] { check_sampling(sampling(1, 40, 0.9f, -0.1f)); }), "min_p");
  EXPECT_EQ(refused([] { check_sampling(sampling(0, 0, 1, 0)); }), "");
  EXPECT_EQ(refused([] { check_sampling(sampling(100, 1 << 20, 1, 0.99f)); }), "");
  EXPECT_EQ(refused([] { check_seed(-1); }), "seed");
  EXPECT_EQ(refused([] { check_seed(0); }), "");
}

TEST(GenerationParams, StopRolesAndBudgets) {
  EXPECT_EQ(refused([] { check_stop({"a", ""}); }), "stop");
  EXPECT_EQ(refused([] { check_stop(std::vector<std::string>(17, "x")); }), "stop");
  EXPECT_EQ(refused([] { check_stop(std::vector<std::string>(16, "x")); }), "");
  EXPECT_EQ(refused([] { check_role("robot"); }), "messages");
  for (const char* role : {"system", "user", "assistant"}) EXPECT_EQ(refused([&] { check_role(role); }), "");
  EXPECT_EQ(refused([] { check_budget("snapkv", 8, 0.5); }), "kv_budget");
  EXPECT_EQ(refused([] { check_budget("snapkv", 0, std::nullopt); }), "kv_budget");
  EXPECT_EQ(refused([] { check_budget("snapkv", (int64_t{1} << 24) + 1, std::nullopt); }), "kv_budget");
  EXPECT_EQ(refused([] { check_budget("snapkv", std::nullopt, 1.0); }), "kv_ratio");
  EXPECT_EQ(refused([] { check_budget("full", 8, std::nullopt); }), "press");
  EXPECT_EQ(refused([] { check_budget("snapkv", 8, std::nullopt); }), "");
  EXPECT_EQ(refused([] { check_budget("snapkv", std::nullopt, 0.999); }), "");
  EXPECT_EQ(refused([] { check_budget("full", std::nullopt, std::nullopt); }), "");
}

// The log-softmax of the raw logits, and the likeliest tokens, ties to the lower id.
TEST(TokenLogprobs, AreTheLogSoftmaxOfTheLogitsWithTheLikeliestTokens) {
  const float logits[] = {1.0f, 3.0f, 3.0f, -2.0f};
  const TokenLogprobs lp = token_logprobs(logits, 4, 0, 2);
  double norm = 0;
  for (float l : logits) norm += std::exp(static_cast<double>(l));
  EXPECT_NEAR(lp.logprob, 1.0 - std::log(norm), 1e-5);
  ASSERT_EQ(lp.top.size(), 2u);
  EXPECT_EQ(lp.top[0].first, 1);
  EXPECT_EQ(lp.top[1].first, 2);
  EXPECT_NEAR(lp.top[0].second, 3.0 - std::log(norm), 1e-5);
  EXPECT_TRUE(token_logprobs(logits, 4, 3, 0).top.empty());
  EXPECT_EQ(token_logprobs(logits, 4, 3, 9).top.size(), 4u);
}

}  // namespace
}  // namespace deferkv
