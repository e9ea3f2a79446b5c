// The request bodies read without a server: what fuzz_server_request found or asserts, each
// as a hand-written case.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/api_error.h"
#include "server/completion_request.h"
#include "server/request_body.h"
#include "server/token_requests.h"

namespace deferkv::server {
namespace {

using nlohmann::json;

// The ApiError a parse throws; fails the test when it throws none.
ApiError error_of(const std::function<void()>& parse) {
  try {
    parse();
  } catch (const ApiError& e) {
    return e;
  }
  ADD_FAILURE() << "no ApiError";
  return ApiError(0, "", "", "", "");
}

CompletionRequest parse(const std::string& body, bool chat = false, const CompletionDefaults& defaults = {}) {
  return parse_completion_request(parse_json_body(body), chat, defaults);
}

TEST(RequestBody, NotJsonIsA400NamedInvalidJson) {
  const ApiError e = error_of([] { parse_json_body("{\"prompt\": "); });
  EXPECT_EQ(e.status, 400);
  EXPECT_EQ(e.code, "invalid_json");
}

TEST(CompletionRequest, AnEmptyStopStringIsRefusedAsAStringAsInAList) {
  EXPECT_EQ(error_of([] { parse(R"({"prompt": "x", "stop": ""})"); }).param, "stop");
  EXPECT_EQ(error_of([] { parse(R"({"prompt": "x", "stop": ["a", ""]})"); }).param, "stop");
  EXPECT_EQ(parse(R"({"prompt": "x", "stop": "."})").stop, std::vector<std::string>{"."});
}

TEST(CompletionRequest, ANullMaxCompletionTokensLeavesMaxTokensInForce) {
  EXPECT_EQ(parse(R"({"messages": [{"role": "user", "content": "hi"}], "max_completion_tokens": null,
                      "max_tokens": 3})", true).max_tokens, 3);
  EXPECT_EQ(parse(R"({"messages": [{"role": "user", "content": "hi"}], "max_completion_tokens": 5,
                      "max_tokens": 3})", true).max_tokens, 5);
  EXPECT_EQ(parse(R"({"prompt": "x", "max_completion_tokens": 5, "max_tokens": 3})").max_tokens, 3);
}

TEST(CompletionRequest, SamplerRangesNameTheirField) {
  // top_p = 0 and min_p = 1 were inside the parser's [0, 1] but outside the sampler's ranges,
  // so their error named no field.
  EXPECT_EQ(error_of([] { parse(R"({"prompt": "x", "top_p": 0})"); }).param, "top_p");
  EXPECT_EQ(error_of([] { parse(R"({"prompt": "x", "min_p": 1})"); }).param, "min_p");
  EXPECT_EQ(error_of([] { parse(R"({"prompt": "x", "temperature": 100.5})"); }).param, "temperature");
  const CompletionRequest r = parse(R"({"prompt": "x", "top_p": 1, "min_p": 0, "temperature": 100})");
  EXPECT_EQ(r.sampling.top_p, 1.0f);
  EXPECT_EQ(r.sampling.min_p, 0.0f);
  EXPECT_EQ(r.sampling.temperature, 100.0f);
}

TEST(CompletionRequest, TheFullCacheTakesNoBudgetButANullOneIsAbsent) {
  EXPECT_EQ(error_of([] { parse(R"({"prompt": "x", "kv_press": "full", "kv_budget": 8})"); }).param, "kv_press");
  EXPECT_EQ(error_of([] { parse(R"({"prompt": "x", "kv_ratio": 0.5})"); }).param, "kv_press");
  EXPECT_EQ(parse(R"({"prompt": "x", "kv_budget": null, "kv_ratio": null})").press, "full");
  CompletionDefaults snapkv;
  snapkv.press = "snapkv";
  snapkv.kv_budget = 64;
  const CompletionRequest r = parse(R"({"prompt": "x", "kv_ratio": 0.5})", false, snapkv);
  EXPECT_EQ(r.kv_budget, 0);
  EXPECT_EQ(r.kv_ratio, 0.5);
}

// Issue 41.6: no max_tokens is "up to the context's end" (the server's -n when it set one).
TEST(CompletionRequest, NoMaxTokensIsNoLimitUnlessTheServerSetsOne) {
  EXPECT_FALSE(parse(R"({"prompt": "x"})").max_tokens.has_value());
  EXPECT_FALSE(parse(R"({"prompt": "x", "max_tokens": null})").max_tokens.has_value());
  CompletionDefaults sixteen;
  sixteen.max_tokens = 16;
  EXPECT_EQ(parse(R"({"prompt": "x"})", false, sixteen).max_tokens, 16);
  EXPECT_EQ(parse(R"({"prompt": "x", "max_tokens": 3})", false, sixteen).max_tokens, 3);
  EXPECT_EQ(error_of([] { parse(R"({"prompt": "x", "max_tokens": 0})"); }).param, "max_tokens");
}

// The engine's checks (generation_params.h) behind the parser: each names its field.
TEST(CompletionRequest, TheEnginesRangesNameTheirField) {
  EXPECT_EQ(error_of([] { parse(R"({"prompt": "x", "temperature": -1})"); }).param, "temperature");
  EXPECT_EQ(error_of([] { parse(R"({"prompt": "x", "top_k": -1})"); }).param, "top_k");
  EXPECT_EQ(error_of([] { parse(R"({"prompt": "x", "seed": -1})"); }).param, "seed");
  EXPECT_EQ(error_of([] { parse(R"({"prompt": "x", "kv_press": "snapkv", "kv_budget": 0})"); }).param, "kv_budget");
  EXPECT_EQ(error_of([] { parse(R"({"messages": [{"role": "robot", "content": "x"}]})", true); }).param, "messages");
}

TEST(CompletionRequest, PromptShapesAndContentParts) {
  EXPECT_EQ(parse(R"({"prompt": ["a", "b"]})").prompts.size(), 2u);
  EXPECT_EQ(parse(R"({"prompt": [[1, 2], [3]]})").prompts[1].tokens, std::vector<int32_t>{3});
  EXPECT_EQ(parse(R"({"prompt": [1, 2]})").prompts.size(), 1u);
  EXPECT_EQ(error_of([] { parse(R"({"prompt": [[]]})"); }).param, "prompt");
  EXPECT_EQ(error_of([] { parse(R"({"prompt": [{"a": 1}]})"); }).param, "prompt");
  const CompletionRequest chat = parse(
      R"({"messages": [{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}]})", true);
  EXPECT_EQ(chat.messages[0].content, "ab");
  EXPECT_EQ(error_of([] { parse(R"({"messages": [{"role": "user", "content": [{"type": "input_audio"}]}]})", true); }).param,
            "messages");
  EXPECT_EQ(error_of([] { parse(R"({"messages": [{"role": "user", "content": [{"text": "a"}]}]})", true); }).param,
            "messages");
}

TEST(CompletionRequest, LogprobsOfEachEndpoint) {
  EXPECT_EQ(parse(R"({"prompt": "x"})").logprobs, -1);
  EXPECT_EQ(parse(R"({"prompt": "x", "logprobs": 0})").logprobs, 0);
  EXPECT_EQ(parse(R"({"prompt": "x", "logprobs": 5})").logprobs, 5);
  const char* hi = R"("messages": [{"role": "user", "content": "hi"}])";
  EXPECT_EQ(parse(std::string("{") + hi + R"(, "logprobs": false})", true).logprobs, -1);
  EXPECT_EQ(parse(std::string("{") + hi + R"(, "logprobs": true})", true).logprobs, 0);
  EXPECT_EQ(parse(std::string("{") + hi + R"(, "logprobs": true, "top_logprobs": 4})", true).logprobs, 4);
  EXPECT_EQ(error_of([&] { parse(std::string("{") + hi + R"(, "logprobs": 3})", true); }).param, "logprobs");
  EXPECT_EQ(error_of([] { parse(R"({"prompt": "x", "logprobs": true})"); }).param, "logprobs");
}

TEST(TokenRequests, TokenizeReadsContentAndFlags) {
  const TokenizeRequest r = parse_tokenize_request(json::parse(R"({"content": "ab", "with_pieces": true})"));
  EXPECT_EQ(r.content, "ab");
  EXPECT_FALSE(r.add_special);
  EXPECT_TRUE(r.with_pieces);
  EXPECT_EQ(error_of([] { parse_tokenize_request(json::parse(R"({"content": 3})")); }).param, "content");
  EXPECT_EQ(error_of([] { parse_tokenize_request(json::parse(R"({"content": "", "add_special": 1})")); }).param,
            "add_special");
}

TEST(TokenRequests, DetokenizeTakesIdsInsideTheVocabulary) {
  EXPECT_EQ(parse_detokenize_request(json::parse(R"({"tokens": [0, 9]})"), 10), (std::vector<int32_t>{0, 9}));
  for (const char* bad : {R"({"tokens": [10]})", R"({"tokens": [-1]})", R"({"tokens": [1.0]})",
                          R"({"tokens": [18446744073709551615]})", R"({"tokens": 3})", "[]"}) {
    EXPECT_EQ(error_of([&] { parse_detokenize_request(json::parse(bad), 10); }).param, "tokens") << bad;
  }
}

}  // namespace
}  // namespace deferkv::server
