// The request and response shapes OpenAI's clients use, against a server on 127.0.0.1:
// max_tokens left out, lists of prompts, content parts, logprobs, the model route, CORS,
// the chat format's fallback, response ids; fields the server does not implement are
// refused by name.
#include <gtest/gtest.h>

#include <regex>
#include <set>

#include "client/sse_events.h"
#include "server/test_server.h"

namespace deferkv::testing {
namespace {

using nlohmann::json;

const std::string kPrompt = "Once upon a time, there was a little girl named Lily. She loved to play";

json parse(const httplib::Result& r) {
  EXPECT_TRUE(r) << "no response";
  return r ? json::parse(r->body) : json();
}

// A 400's (or 404's) error `param`, checking the shape.
std::string error_param(const httplib::Result& r, int status = 400) {
  EXPECT_TRUE(r);
  if (!r) return "";
  EXPECT_EQ(r->status, status) << r->body;
  const json e = json::parse(r->body, nullptr, false);
  EXPECT_TRUE(e.contains("error")) << r->body;
  return e["error"]["param"].is_string() ? e["error"]["param"].get<std::string>() : "";
}

// The JSON events of a streamed response (without [DONE]).
std::vector<json> events_of(const std::string& body) {
  client::SseReader sse;
  std::vector<json> out;
  for (const std::string& data : sse.feed(body)) {
    if (data != "[DONE]") out.push_back(json::parse(data));
  }
  return out;
}

server::ServerOptions small_context(int64_t n_ctx) {
  server::ServerOptions o = test_server_options();
  o.n_ctx = n_ctx;
  return o;
}

// Issue 41.6: no max_tokens generated 128 by default and refused a prompt that fit with less
// room; now it runs to the context's end, as OpenAI and llama-server do. A max_tokens beyond
// the room is cut to it (llama-server stops at the context's end): "length" both ways.
TEST(OpenAiShapes, WithoutMaxTokensAFittingPromptRunsToTheContextsEnd) {
  TestServer t(small_context(64));
  const json no_limit = parse(t.post("/v1/completions", {{"prompt", kPrompt}, {"temperature", 0}, {"ignore_eos", true}}));
  ASSERT_TRUE(no_limit.contains("choices")) << no_limit.dump();
  const int64_t prompt = no_limit["usage"]["prompt_tokens"];
  ASSERT_LT(prompt, 64);
  EXPECT_GE(no_limit["usage"]["completion_tokens"].get<int64_t>(), 64 - prompt);
  EXPECT_EQ(no_limit["choices"][0]["finish_reason"], "length");
  const json too_many =
      parse(t.post("/v1/completions", {{"prompt", kPrompt}, {"temperature", 0}, {"ignore_eos", true}, {"max_tokens", 1000}}));
  ASSERT_TRUE(too_many.contains("choices")) << too_many.dump();
  EXPECT_EQ(too_many["usage"]["completion_tokens"].get<int64_t>(), 64 - prompt);
  EXPECT_EQ(too_many["choices"][0]["finish_reason"], "length");
  // Chat as well (the fault the issue reported: a 1922-token prompt in a 2048 context).
  auto chat = t.post("/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", "Tell me a story"}}}}});
  EXPECT_EQ(chat->status, 200) << chat->body;
}

TEST(OpenAiShapes, ContentPartsAreTextAndOtherPartsAreRefusedByType) {
  TestServer t;
  const json as_string = parse(t.post("/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", "Tell me a story"}}}},
                                                               {"max_tokens", 8}, {"temperature", 0}}));
  const json parts = {{{"type", "text"}, {"text", "Tell me "}}, {{"type", "text"}, {"text", "a story"}}};
  const json as_parts = parse(t.post("/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", parts}}}},
                                                              {"max_tokens", 8}, {"temperature", 0}}));
  ASSERT_TRUE(as_parts.contains("choices")) << as_parts.dump();
  EXPECT_EQ(as_parts["choices"][0]["message"]["content"], as_string["choices"][0]["message"]["content"]);
  EXPECT_EQ(as_parts["usage"]["prompt_tokens"], as_string["usage"]["prompt_tokens"]);
  const json image = {{{"type", "text"}, {"text", "What is this?"}},
                      {{"type", "image_url"}, {"image_url", {{"url", "http://example.invalid/x.png"}}}}};
  auto refused = t.post("/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", image}}}}});
  EXPECT_EQ(error_param(refused), "messages");
  EXPECT_NE(refused->body.find("image_url"), std::string::npos) << refused->body;
}

// One choice per prompt, in order, each the text its prompt alone gets.
TEST(OpenAiShapes, AListOfPromptsGivesOneChoiceEach) {
  TestServer t;
  const std::vector<std::string> prompts = {kPrompt, "The sun was shining and the birds", "Tom had a red ball"};
  std::vector<json> alone;
  for (const std::string& p : prompts) {
    alone.push_back(parse(t.post("/v1/completions", {{"prompt", p}, {"max_tokens", 10}, {"temperature", 0}})));
  }
  const json many = parse(t.post("/v1/completions", {{"prompt", prompts}, {"max_tokens", 10}, {"temperature", 0}}));
  ASSERT_EQ(many["choices"].size(), 3u) << many.dump();
  int64_t prompt_tokens = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_EQ(many["choices"][i]["index"], i);
    EXPECT_EQ(many["choices"][i]["text"], alone[i]["choices"][0]["text"]) << i;
    prompt_tokens += alone[i]["usage"]["prompt_tokens"].get<int64_t>();
  }
  EXPECT_EQ(many["usage"]["prompt_tokens"], prompt_tokens);
  // Lists of token lists too; streaming takes one prompt.
  const json ids = parse(t.post("/tokenize", {{"content", kPrompt}, {"add_special", true}}))["tokens"];
  const json of_ids = parse(t.post("/v1/completions", {{"prompt", {ids, ids}}, {"max_tokens", 10}, {"temperature", 0}}));
  ASSERT_EQ(of_ids["choices"].size(), 2u) << of_ids.dump();
  EXPECT_EQ(of_ids["choices"][1]["text"], alone[0]["choices"][0]["text"]);
  EXPECT_EQ(error_param(t.post("/v1/completions", {{"prompt", prompts}, {"stream", true}})), "prompt");
  EXPECT_EQ(error_param(t.post("/v1/completions", {{"prompt", {"a", 3}}})), "prompt");
}

TEST(OpenAiShapes, UnimplementedFieldsAreRefusedByNameAndTheirNeutralValuesTaken) {
  TestServer t;
  const json base = {{"prompt", "Once"}, {"max_tokens", 2}};
  auto with = [&](const char* key, const json& value) {
    json b = base;
    b[key] = value;
    return t.post("/v1/completions", b);
  };
  EXPECT_EQ(error_param(with("n", 2)), "n");
  EXPECT_EQ(error_param(with("echo", true)), "echo");
  EXPECT_EQ(error_param(with("response_format", {{"type", "json_object"}})), "response_format");
  EXPECT_EQ(error_param(with("response_format", {{"type", "json_schema"}, {"json_schema", json::object()}})),
            "response_format");
  EXPECT_EQ(error_param(with("logprobs", 21)), "logprobs");
  EXPECT_EQ(with("n", 1)->status, 200);
  EXPECT_EQ(with("echo", false)->status, 200);
  EXPECT_EQ(with("response_format", {{"type", "text"}})->status, 200);
  auto chat = t.post("/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"top_logprobs", 2}});
  EXPECT_EQ(error_param(chat), "top_logprobs");
}

// Completions' `logprobs: k`: one entry a generated token, the chosen one the likeliest at
// temperature 0, k alternatives each; the same tokens streamed, spread over the chunks.
TEST(OpenAiShapes, CompletionLogprobsStreamedAndNot) {
  TestServer t;
  const json body = {{"prompt", kPrompt}, {"max_tokens", 12}, {"temperature", 0}, {"logprobs", 2}};
  const json r = parse(t.post("/v1/completions", body));
  const json& lp = r["choices"][0]["logprobs"];
  ASSERT_TRUE(lp.is_object()) << r.dump();
  ASSERT_EQ(lp["tokens"].size(), r["usage"]["completion_tokens"].get<size_t>());
  ASSERT_EQ(lp["token_logprobs"].size(), lp["tokens"].size());
  ASSERT_EQ(lp["top_logprobs"].size(), lp["tokens"].size());
  std::string joined;
  for (size_t i = 0; i < lp["tokens"].size(); ++i) {
    joined += lp["tokens"][i].get<std::string>();
    const double chosen = lp["token_logprobs"][i];
    EXPECT_LE(chosen, 0.0);
    const json& top = lp["top_logprobs"][i];
    ASSERT_EQ(top.size(), 2u) << top.dump();
    EXPECT_DOUBLE_EQ(top[lp["tokens"][i].get<std::string>()].get<double>(), chosen);  // greedy: the likeliest
    EXPECT_EQ(lp["text_offset"][i], i == 0 ? 0 : lp["text_offset"][i - 1].get<size_t>() + lp["tokens"][i - 1].get<std::string>().size());
  }
  EXPECT_EQ(joined, r["choices"][0]["text"].get<std::string>());
  json streamed_body = body;
  streamed_body["stream"] = true;
  auto s = t.post("/v1/completions", streamed_body);
  json tokens = json::array(), logprobs = json::array();
  for (const json& e : events_of(s->body)) {
    const json& c = e["choices"][0];
    if (c["logprobs"].is_null()) continue;
    for (const json& tok : c["logprobs"]["tokens"]) tokens.push_back(tok);
    for (const json& v : c["logprobs"]["token_logprobs"]) logprobs.push_back(v);
  }
  EXPECT_EQ(tokens, lp["tokens"]);
  EXPECT_EQ(logprobs, lp["token_logprobs"]);
  // Not asked for: null.
  EXPECT_TRUE(parse(t.post("/v1/completions", {{"prompt", kPrompt}, {"max_tokens", 2}}))["choices"][0]["logprobs"].is_null());
}

TEST(OpenAiShapes, ChatLogprobsInOpenAisShape) {
  TestServer t;
  const json body = {{"messages", {{{"role", "user"}, {"content", "Tell me a story"}}}},
                     {"max_tokens", 8}, {"temperature", 0}, {"logprobs", true}, {"top_logprobs", 3}};
  const json r = parse(t.post("/v1/chat/completions", body));
  const json& content = r["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(content.size(), r["usage"]["completion_tokens"].get<size_t>()) << r.dump();
  for (const json& entry : content) {
    ASSERT_EQ(entry["top_logprobs"].size(), 3u);
    EXPECT_EQ(entry["top_logprobs"][0]["token"], entry["token"]);
    EXPECT_DOUBLE_EQ(entry["top_logprobs"][0]["logprob"].get<double>(), entry["logprob"].get<double>());
    std::string bytes;
    for (const json& b : entry["bytes"]) bytes += static_cast<char>(b.get<int>());
    EXPECT_EQ(bytes, entry["token"].get<std::string>());
  }
  json only_chosen = body;
  only_chosen.erase("top_logprobs");
  const json r2 = parse(t.post("/v1/chat/completions", only_chosen));
  EXPECT_TRUE(r2["choices"][0]["logprobs"]["content"][0]["top_logprobs"].empty());
  json streamed = body;
  streamed["stream"] = true;
  json entries = json::array();
  for (const json& e : events_of(t.post("/v1/chat/completions", streamed)->body)) {
    const json& c = e["choices"][0];
    if (!c["logprobs"].is_null()) {
      for (const json& entry : c["logprobs"]["content"]) entries.push_back(entry);
    }
  }
  EXPECT_EQ(entries, content);
  EXPECT_TRUE(parse(t.post("/v1/chat/completions", {{"messages", body["messages"]}, {"max_tokens", 2}}))["choices"][0]
                  ["logprobs"].is_null());
}

TEST(OpenAiShapes, AModelByIdAndAnUnknownOneIs404InOpenAisShape) {
  TestServer t;
  const json m = parse(t.get("/v1/models/stories260K.gguf"));
  EXPECT_EQ(m["id"], "stories260K.gguf");
  EXPECT_EQ(m["object"], "model");
  auto unknown = t.get("/v1/models/gpt-4");
  EXPECT_EQ(error_param(unknown, 404), "model");
  EXPECT_EQ(json::parse(unknown->body)["error"]["code"], "model_not_found");
}

// A browser's preflight gets llama-server's CORS headers, whatever the path, and every
// response allows the caller's origin.
TEST(OpenAiShapes, CorsPreflightAndAllowOrigin) {
  TestServer t;
  auto client = t.client();
  auto preflight = client->Options("/v1/chat/completions",
                                   {{"Origin", "http://localhost:3000"}, {"Access-Control-Request-Method", "POST"}});
  ASSERT_TRUE(preflight);
  EXPECT_EQ(preflight->status, 200);
  EXPECT_EQ(preflight->get_header_value("Access-Control-Allow-Origin"), "http://localhost:3000");
  EXPECT_EQ(preflight->get_header_value("Access-Control-Allow-Methods"), "GET, POST, DELETE");
  EXPECT_EQ(preflight->get_header_value("Access-Control-Allow-Headers"), "*");
  auto get = client->Get("/v1/models", {{"Origin", "http://localhost:3000"}});
  EXPECT_EQ(get->get_header_value("Access-Control-Allow-Origin"), "http://localhost:3000");
  EXPECT_EQ(client->Get("/v1/models")->get_header_value("Access-Control-Allow-Origin"), "*");
  auto error = client->Post("/v1/completions", {{"Origin", "http://a.test"}}, "{", "application/json");
  EXPECT_EQ(error->status, 400);
  EXPECT_EQ(error->get_header_value("Access-Control-Allow-Origin"), "http://a.test");
}

// stories260K carries no chat format: without --chat-template the server chats in ChatML,
// as llama-server falls back to a default, and says so in /props.
TEST(OpenAiShapes, AModelWithoutAChatFormatChatsInChatMl) {
  server::ServerOptions o = test_server_options();
  o.chat_template = "";
  TestServer t(o);
  const json props = parse(t.get("/props"));
  EXPECT_EQ(props["chat_template"], "chatml");
  EXPECT_EQ(props["chat_template_fallback"], true);
  const json body = {{"messages", {{{"role", "user"}, {"content", "Tell me a story"}}}}, {"max_tokens", 6}, {"temperature", 0}};
  const json fallback = parse(t.post("/v1/chat/completions", body));
  TestServer explicit_chatml;  // test_server_options() names chatml
  const json named = parse(explicit_chatml.post("/v1/chat/completions", body));
  ASSERT_TRUE(fallback.contains("choices")) << fallback.dump();
  EXPECT_EQ(fallback["choices"][0]["message"]["content"], named["choices"][0]["message"]["content"]);
  EXPECT_EQ(parse(explicit_chatml.get("/props"))["chat_template_fallback"], false);
}

// Ids were cmpl-1, cmpl-2 ... again after every start; now random, so unique across starts.
TEST(OpenAiShapes, ResponseIdsAreUniqueAcrossRestarts) {
  std::set<std::string> ids;
  const std::regex shape("(cmpl|chatcmpl)-[0-9a-f]{24}");
  for (int start = 0; start < 2; ++start) {
    TestServer t;
    for (int i = 0; i < 2; ++i) {
      const std::string id = parse(t.post("/v1/completions", {{"prompt", "Once"}, {"max_tokens", 1}}))["id"];
      EXPECT_TRUE(std::regex_match(id, shape)) << id;
      ids.insert(id);
    }
    const std::string chat_id =
        parse(t.post("/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"max_tokens", 1}}))["id"];
    EXPECT_EQ(chat_id.rfind("chatcmpl-", 0), 0u) << chat_id;
    ids.insert(chat_id);
  }
  EXPECT_EQ(ids.size(), 6u);
}

}  // namespace
}  // namespace deferkv::testing
