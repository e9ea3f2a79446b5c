// Compressed contexts in the server (issue 44): POST/GET/DELETE /v1/contexts, completions
// that continue after one (`kv_context`), their memory under --kv-memory, and bad input.
// Greedy answers are checked against the library's compress/answer path
// (CompressedContext::compress, then generate(session, context, question)) on the same
// tokens, computed here on a Session of its own.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

#include <unistd.h>

#include "base/thread_pool.h"
#include "deferkv/compressed_context.h"
#include "deferkv/model.h"
#include "deferkv/press.h"
#include "deferkv/tokenizer.h"
#include "server/test_server.h"

namespace deferkv::testing {
namespace {

using nlohmann::json;

constexpr int64_t kAnswerTokens = 12;
constexpr int64_t kBudget = 40;  // entries per KV head, above snapkv's window of 32

const std::string kDocument =
    "Once upon a time, there was a little girl named Lily. She loved to play in the park with her red ball. One "
    "day, she saw a big dog near the tree. The dog was brown and had a long tail. Lily was scared at first, but "
    "the dog wagged its tail and smiled. Lily threw the ball and the dog ran to get it. They played all day long.";
const std::vector<std::string> kQuestions = {" What color was the ball?", " Where was the dog?", " Who threw the ball?",
                                             " What did the dog do?",    " Was Lily scared?",   " What was brown?",
                                             " Where did Lily play?",    " How long did they play?"};

json parse(const httplib::Result& r) {
  EXPECT_TRUE(r) << "no response";
  return r ? json::parse(r->body) : json();
}

const Model& model() {
  static const std::shared_ptr<const Model> m = Model::load(stories_model_path());
  return *m;
}
std::shared_ptr<const Model> model_ptr() {
  static const std::shared_ptr<const Model> m = Model::load(stories_model_path());
  return m;
}

// The library's greedy answer: the context compressed on a Session with the press, a fresh
// Session started from it reading the question.
std::vector<int32_t> library_answer(const std::vector<int32_t>& context_tokens, const std::string& press,
                                    const std::vector<int32_t>& question, int64_t budget = kBudget) {
  auto pool = std::make_shared<ThreadPool>(1);
  Session compressor(model_ptr(), pool);
  if (press != "full") compressor.set_press(make_press(press, KvBudget::per_head(budget)));
  const auto context = CompressedContext::compress(compressor, context_tokens);
  Session s(model_ptr(), pool);
  SamplerParams p;
  p.temperature = 0;
  Sampler sampler(p);
  GenerateOptions g;
  g.n_predict = kAnswerTokens;
  g.stop_at_end_of_generation = false;
  return generate(s, *context, question, g, sampler).tokens;
}

std::vector<std::string> pieces(const std::vector<int32_t>& ids) {
  std::vector<std::string> out;
  for (int32_t id : ids) out.push_back(model().tokenizer().token_piece(id));
  return out;
}

json make_context(const TestServer& t, const json& body) {
  const auto r = t.post("/v1/contexts", body);
  EXPECT_TRUE(r);
  if (!r) return {};
  EXPECT_EQ(r->status, 200) << r->body;
  return json::parse(r->body);
}

// A greedy completion after `id`: its tokens' pieces (from logprobs) and its usage.
struct Answer {
  int status = 0;
  std::vector<std::string> pieces;
  json usage;
  json body;
};
Answer complete(const TestServer& t, const std::string& id, const std::string& question, bool chat = false,
                bool extend = false) {
  json body = {{"kv_context", id}, {"max_tokens", kAnswerTokens}, {"temperature", 0}, {"ignore_eos", true}};
  if (extend) body["kv_context_extend"] = true;
  if (chat) {
    body["messages"] = json::array({{{"role", "user"}, {"content", question}}});
    body["logprobs"] = true;
  } else {
    body["prompt"] = question;
    body["logprobs"] = 0;
  }
  const auto r = t.post(chat ? "/v1/chat/completions" : "/v1/completions", body);
  Answer a;
  if (!r) return a;
  a.status = r->status;
  a.body = json::parse(r->body);
  if (a.status != 200) return a;
  const json& lp = a.body["choices"][0]["logprobs"];
  if (chat) {
    for (const json& e : lp["content"]) a.pieces.push_back(e["token"]);
  } else {
    for (const json& e : lp["tokens"]) a.pieces.push_back(e);
  }
  a.usage = a.body["usage"];
  return a;
}

server::ServerOptions slots(int n) {
  server::ServerOptions o = test_server_options();
  o.n_slots = n;
  return o;
}

void expect_error(const httplib::Result& r, int status, const std::string& param, const std::string& code = "") {
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, status) << r->body;
  const json e = json::parse(r->body);
  ASSERT_TRUE(e.contains("error")) << r->body;
  EXPECT_TRUE(e["error"]["message"].is_string());
  if (param.empty()) {
    EXPECT_TRUE(e["error"]["param"].is_null()) << r->body;
  } else {
    EXPECT_EQ(e["error"]["param"], param) << r->body;
  }
  if (!code.empty()) EXPECT_EQ(e["error"]["code"], code) << r->body;
}

TEST(ServerContexts, CreateListGetDelete) {
  TestServer t;
  const std::vector<int32_t> tokens = model().tokenizer().encode(kDocument, true, false);
  const json c = make_context(t, {{"prompt", kDocument}, {"kv_press", "snapkv"}, {"kv_budget", kBudget}});
  const std::string id = c["id"];
  EXPECT_EQ(id.rfind("ctx-", 0), 0u);
  EXPECT_EQ(c["object"], "kv_context");
  EXPECT_EQ(c["prompt_tokens"], tokens.size());
  // snapkv keeps kBudget entries in every layer's every KV head (the prompt is longer).
  const ModelConfig& cfg = model().config();
  ASSERT_GT(static_cast<int64_t>(tokens.size()), kBudget);
  EXPECT_EQ(c["kv_entries_kept"], cfg.n_layer * cfg.n_head_kv * kBudget);
  EXPECT_GT(c["kv_bytes"].get<int64_t>(), 0);
  EXPECT_EQ(c["mode"], "question-agnostic");

  const json list = parse(t.get("/v1/contexts"));
  EXPECT_EQ(list["object"], "list");
  ASSERT_EQ(list["data"].size(), 1u);
  EXPECT_EQ(list["data"][0]["id"], id);
  EXPECT_EQ(parse(t.get("/v1/contexts/" + id)), c);
  const std::string metrics = t.get("/metrics")->body;
  EXPECT_EQ(metric_value(metrics, "deferkv_contexts_resident"), 1);
  EXPECT_EQ(metric_value(metrics, "deferkv_context_bytes"), c["kv_bytes"].get<double>());

  const auto del = t.client()->Delete(("/v1/contexts/" + id).c_str());
  ASSERT_TRUE(del);
  EXPECT_EQ(del->status, 200);
  EXPECT_EQ(json::parse(del->body)["deleted"], true);
  expect_error(t.get("/v1/contexts/" + id), 404, "kv_context", "context_not_found");
  expect_error(t.client()->Delete(("/v1/contexts/" + id).c_str()), 404, "kv_context", "context_not_found");
  EXPECT_EQ(parse(t.get("/v1/contexts"))["data"].size(), 0u);
  EXPECT_EQ(metric_value(t.get("/metrics")->body, "deferkv_context_bytes"), 0);
}

TEST(ServerContexts, GreedyAnswerEqualsTheLibrarys) {
  TestServer t;
  const Tokenizer& tok = model().tokenizer();
  const std::vector<int32_t> tokens = tok.encode(kDocument, true, false);
  const json made = make_context(t, {{"prompt", kDocument}, {"kv_press", "snapkv"}, {"kv_budget", kBudget}});
  const std::string id = made["id"];
  std::set<std::vector<std::string>> distinct;  // the questions matter: not one answer for all
  for (size_t q = 0; q < kQuestions.size(); ++q) {
    const std::vector<int32_t> question = tok.encode(kQuestions[q], false, false);
    const Answer a = complete(t, id, kQuestions[q]);
    ASSERT_EQ(a.status, 200) << a.body;
    const std::vector<std::string> expected = pieces(library_answer(tokens, "snapkv", question));
    EXPECT_EQ(a.pieces, expected) << kQuestions[q];
    distinct.insert(expected);
    EXPECT_EQ(a.usage["prompt_tokens_details"]["cached_tokens"], tokens.size());
    EXPECT_EQ(a.usage["prompt_tokens"], tokens.size() + question.size());
    EXPECT_EQ(a.usage["kv_press"], made["kv_press"]);  // the context's press, as it was made
    EXPECT_EQ(a.usage["kv_context"], id);
  }
  EXPECT_GT(distinct.size(), 1u);
  const std::string metrics = t.get("/metrics")->body;
  EXPECT_EQ(metric_value(metrics, "deferkv_context_hits_total"), static_cast<double>(kQuestions.size()));
}

// A context made with deferkv is deferred: GET shows its pool and budget, and each
// completion after it resumes the press and evicts at its own step d, answering as the
// library's compress/answer (one session resumed from the context) does; a turn that passed
// step d extends it into a context of that turn's kept set.
TEST(ServerContexts, ADeferredContextChoosesAtEachCompletionsStepD) {
  TestServer t;
  constexpr int64_t kSmallBudget = 12;
  const std::string press = "deferkv:window=4,pool=3x";
  const Tokenizer& tok = model().tokenizer();
  const std::vector<int32_t> tokens = tok.encode(kDocument, true, false);
  ASSERT_GT(static_cast<int64_t>(tokens.size()), 3 * kSmallBudget);
  const json made = make_context(t, {{"prompt", kDocument}, {"kv_press", press}, {"kv_budget", kSmallBudget}});
  const std::string id = made["id"];
  const json got = parse(t.get("/v1/contexts/" + id));
  EXPECT_EQ(got["mode"], "deferred");
  EXPECT_EQ(got["deferred"]["pool"], "3x");
  EXPECT_EQ(got["deferred"]["budget_entries_per_head"], kSmallBudget);
  const ModelConfig& cfg = model().config();
  EXPECT_EQ(got["deferred"]["pool_entries"], cfg.n_layer * cfg.n_head_kv * 3 * kSmallBudget);
  for (const std::string& question : {kQuestions[0], kQuestions[3]}) {
    const Answer a = complete(t, id, question);
    ASSERT_EQ(a.status, 200) << a.body;
    EXPECT_EQ(a.pieces, pieces(library_answer(tokens, made["kv_press"], tok.encode(question, false, false),
                                              kSmallBudget)))
        << question;
    EXPECT_EQ(a.usage["kv_context"], id);
  }
  const Answer turn = complete(t, id, kQuestions[1], false, true);
  ASSERT_EQ(turn.status, 200) << turn.body;
  const json extended = parse(t.get("/v1/contexts/" + turn.body["kv_context"].get<std::string>()));
  EXPECT_EQ(extended["mode"], "question-agnostic");
  EXPECT_TRUE(extended["deferred"].is_null());
  EXPECT_EQ(complete(t, extended["id"], kQuestions[2]).status, 200);
}

TEST(ServerContexts, ChatJoinsContextAndMessagesByTheTemplate) {
  TestServer t;  // ChatML (test_server_options)
  const Tokenizer& tok = model().tokenizer();
  const ChatTemplate chatml = ChatTemplate::detect(tok, "chatml");
  const std::vector<ChatMessage> doc = {{"system", "You answer questions about the story."}, {"user", kDocument}};
  const std::string id = make_context(t, {{"messages", json::array({{{"role", "system"}, {"content", doc[0].content}},
                                                                    {{"role", "user"}, {"content", doc[1].content}}})},
                                          {"kv_press", "snapkv"},
                                          {"kv_budget", kBudget}})["id"];
  const std::vector<int32_t> context_tokens = tok.encode(chatml.apply(doc, false), true, true);
  const std::vector<int32_t> question = tok.encode(chatml.apply({{"user", kQuestions[0]}}, true), false, true);
  const Answer a = complete(t, id, kQuestions[0], true);
  ASSERT_EQ(a.status, 200) << a.body;
  EXPECT_EQ(a.pieces, pieces(library_answer(context_tokens, "snapkv", question)));
  EXPECT_EQ(a.usage["prompt_tokens_details"]["cached_tokens"], context_tokens.size());
}

// A conversation of three turns, each sent with the context the turn before returned
// (kv_context_extend): its greedy answers are those of one library Session that starts from
// the compressed document and simply reads each turn's question after the last answer, and
// each turn's cached_tokens counts the document and every earlier turn.
TEST(ServerContexts, AMultiTurnChatExtendsItsContextEachTurn) {
  TestServer t;  // ChatML
  const Tokenizer& tok = model().tokenizer();
  const ChatTemplate chatml = ChatTemplate::detect(tok, "chatml");
  const std::vector<ChatMessage> doc = {{"system", "You answer questions about the story."}, {"user", kDocument}};
  const json first_made = make_context(t, {{"messages", json::array({{{"role", "system"}, {"content", doc[0].content}},
                                                                       {{"role", "user"}, {"content", doc[1].content}}})},
                                             {"kv_press", "snapkv"},
                                             {"kv_budget", kBudget}});
  const std::string first = first_made["id"];
  const std::vector<int32_t> context_tokens = tok.encode(chatml.apply(doc, false), true, true);

  // The reference: the document compressed as the server does, then one session going on.
  auto pool = std::make_shared<ThreadPool>(1);
  Session compressor(model_ptr(), pool);
  compressor.set_press(make_press("snapkv", KvBudget::per_head(kBudget)));
  const auto compressed = CompressedContext::compress(compressor, context_tokens);
  Session s(model_ptr(), pool);
  start_session(s, *compressed);
  const int64_t n_vocab = model().config().n_vocab;

  std::string id = first;
  size_t cached = context_tokens.size();
  std::set<std::string> ids = {first};
  for (int turn = 0; turn < 3; ++turn) {
    const std::vector<int32_t> question = tok.encode(chatml.apply({{"user", kQuestions[turn]}}, true), false, true);
    s.prefill_question(question);
    std::vector<int32_t> expected;
    for (int64_t i = 0; i < kAnswerTokens; ++i) {
      const float* logits = s.last_logits();
      expected.push_back(static_cast<int32_t>(std::max_element(logits, logits + n_vocab) - logits));
      s.decode(expected.back());
    }
    const Answer a = complete(t, id, kQuestions[turn], true, true);
    ASSERT_EQ(a.status, 200) << a.body;
    EXPECT_EQ(a.pieces, pieces(expected)) << "turn " << turn + 1;
    EXPECT_EQ(a.usage["prompt_tokens_details"]["cached_tokens"], cached) << "turn " << turn + 1;
    EXPECT_EQ(a.usage["kv_context"], id);
    ASSERT_TRUE(a.body["kv_context"].is_string()) << a.body;
    id = a.body["kv_context"];
    EXPECT_TRUE(ids.insert(id).second) << "each turn makes a new context";
    cached += question.size() + kAnswerTokens;  // the turn's question and its answer, all fed
    const json made = parse(t.get("/v1/contexts/" + id));
    EXPECT_EQ(made["prompt_tokens"], cached);
    EXPECT_EQ(made["kv_press"], first_made["kv_press"]);  // the document's press, which kept what it kept
  }
  // Contexts are immutable: the first still answers as it did, from the document alone.
  EXPECT_EQ(parse(t.get("/v1/contexts"))["data"].size(), 4u);
  // A stream gives the extended context's id on its last chunk, beside usage.
  const auto streamed = t.post("/v1/chat/completions",
                               {{"kv_context", id}, {"kv_context_extend", true}, {"stream", true}, {"max_tokens", 4}, {"ignore_eos", true},
                                {"messages", json::array({{{"role", "user"}, {"content", kQuestions[3]}}})}});
  ASSERT_TRUE(streamed);
  json last;
  for (size_t at = streamed->body.find("data: {"); at != std::string::npos; at = streamed->body.find("data: {", at + 1)) {
    last = json::parse(streamed->body.substr(at + 6, streamed->body.find("\n", at) - at - 6));
  }
  ASSERT_TRUE(last.contains("usage")) << streamed->body;
  ASSERT_TRUE(last["kv_context"].is_string()) << last;
  EXPECT_EQ(parse(t.get("/v1/contexts/" + last["kv_context"].get<std::string>()))["prompt_tokens"].get<size_t>(),
            cached + tok.encode(chatml.apply({{"user", kQuestions[3]}}, true), false, true).size() + 4);
  const Answer again = complete(t, first, kQuestions[0], true);
  ASSERT_EQ(again.status, 200) << again.body;
  EXPECT_EQ(again.usage["prompt_tokens_details"]["cached_tokens"], context_tokens.size());
  EXPECT_FALSE(again.body.contains("kv_context"));
}

// --context-reuse: a prompt that begins with kept contexts' tokens, under their press, starts
// from the longest of them: its answer is the library's from that context with the rest as
// the question, and cached_tokens counts that context's tokens. A context of another press,
// or a server without the flag, reuses nothing.
TEST(ServerContexts, ContextReuseStartsFromTheLongestMatchingContext) {
  const Tokenizer& tok = model().tokenizer();
  const std::string head_text = kDocument.substr(0, kDocument.find(" One day"));
  const std::string prompt_text = kDocument + kQuestions[0];
  const std::vector<int32_t> head = tok.encode(head_text, true, false);
  const std::vector<int32_t> doc = tok.encode(kDocument, true, false);
  const std::vector<int32_t> prompt = tok.encode(prompt_text, true, false);
  // The tokenizer keeps these prefixes (each cut is before a space).
  ASSERT_LT(head.size(), doc.size());
  ASSERT_TRUE(std::equal(head.begin(), head.end(), doc.begin()));
  ASSERT_TRUE(std::equal(doc.begin(), doc.end(), prompt.begin()));
  const std::vector<int32_t> question(prompt.begin() + static_cast<int64_t>(doc.size()), prompt.end());
  const json body = {{"prompt", prompt_text}, {"kv_press", "snapkv"}, {"kv_budget", kBudget},
                     {"max_tokens", kAnswerTokens}, {"temperature", 0}, {"ignore_eos", true}, {"logprobs", 0}};
  auto answer_of = [](const httplib::Result& r) {
    Answer a;
    EXPECT_TRUE(r);
    if (!r) return a;
    a.status = r->status;
    a.body = json::parse(r->body);
    if (a.status != 200) return a;
    for (const json& e : a.body["choices"][0]["logprobs"]["tokens"]) a.pieces.push_back(e);
    a.usage = a.body["usage"];
    return a;
  };
  {
    server::ServerOptions o = test_server_options();
    o.context_reuse = true;
    TestServer t(o);
    make_context(t, {{"prompt", head_text}, {"kv_press", "snapkv"}, {"kv_budget", kBudget}});
    make_context(t, {{"prompt", kDocument}, {"kv_press", "snapkv"}, {"kv_budget", kBudget + 8}});
    make_context(t, {{"prompt", kDocument}, {"kv_press", "snapkv"}, {"kv_budget", kBudget}});
    const Answer a = answer_of(t.post("/v1/completions", body));
    ASSERT_EQ(a.status, 200) << a.body;
    EXPECT_EQ(a.usage["prompt_tokens_details"]["cached_tokens"], doc.size());
    EXPECT_EQ(a.usage["prompt_tokens"], prompt.size());
    EXPECT_EQ(a.pieces, pieces(library_answer(doc, "snapkv", question)));
    json other = body;
    other["kv_budget"] = kBudget + 16;  // no context has this press: the whole prompt is prefilled
    const Answer b = answer_of(t.post("/v1/completions", other));
    ASSERT_EQ(b.status, 200) << b.body;
    EXPECT_EQ(b.usage["prompt_tokens_details"]["cached_tokens"], 0);
  }
  TestServer plain;  // without --context-reuse
  make_context(plain, {{"prompt", kDocument}, {"kv_press", "snapkv"}, {"kv_budget", kBudget}});
  const Answer c = answer_of(plain.post("/v1/completions", body));
  ASSERT_EQ(c.status, 200) << c.body;
  EXPECT_EQ(c.usage["prompt_tokens_details"]["cached_tokens"], 0);
}

TEST(ServerContexts, EightConcurrentRequestsOnOneContextEachAnswerAsAlone) {
  TestServer t(slots(8));
  const Tokenizer& tok = model().tokenizer();
  const std::vector<int32_t> tokens = tok.encode(kDocument, true, false);
  const std::string id = make_context(t, {{"prompt", kDocument}, {"kv_press", "snapkv"}, {"kv_budget", kBudget}})["id"];
  std::vector<Answer> answers(kQuestions.size());
  std::vector<std::thread> threads;
  for (size_t q = 0; q < kQuestions.size(); ++q) {
    threads.emplace_back([&, q] { answers[q] = complete(t, id, kQuestions[q]); });
  }
  for (auto& th : threads) th.join();
  for (size_t q = 0; q < kQuestions.size(); ++q) {
    ASSERT_EQ(answers[q].status, 200) << answers[q].body;
    EXPECT_EQ(answers[q].pieces, pieces(library_answer(tokens, "snapkv", tok.encode(kQuestions[q], false, false))))
        << kQuestions[q];
  }
  // The same question eight times at once: eight equal answers.
  std::vector<Answer> same(8);
  threads.clear();
  for (size_t i = 0; i < same.size(); ++i) threads.emplace_back([&, i] { same[i] = complete(t, id, kQuestions[0]); });
  for (auto& th : threads) th.join();
  for (const Answer& a : same) EXPECT_EQ(a.pieces, answers[0].pieces);
}

// The text of a streamed completion's chunks.
std::string stream_text(const std::string& body) {
  std::string text;
  for (size_t at = 0; (at = body.find("data: {", at)) != std::string::npos;) {
    const size_t end = body.find("\n\n", at);
    const json e = json::parse(body.substr(at + 6, end - at - 6));
    if (e.contains("choices") && !e["choices"].empty()) text += e["choices"][0]["text"].get<std::string>();
    at = end;
  }
  return text;
}

TEST(ServerContexts, DeletingAContextInUseLetsItsRequestsFinish) {
  TestServer t(slots(2));
  const std::string id = make_context(t, {{"prompt", kDocument}, {"kv_press", "snapkv"}, {"kv_budget", kBudget}})["id"];
  json body = {{"kv_context", id}, {"prompt", kQuestions[1]}, {"max_tokens", 300}, {"temperature", 0}, {"ignore_eos", true}};
  const json alone = parse(t.post("/v1/completions", body));
  // The same request streamed; the context is deleted once its first text has come (it runs).
  body["stream"] = true;
  httplib::Request req = completion_post(body);
  std::string streamed;
  std::atomic<bool> running{false};
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    streamed.append(data, n);
    running = true;
    return true;
  };
  std::thread th([&] {
    httplib::Response res;
    httplib::Error error = httplib::Error::Success;
    auto c = t.client();
    c->send(req, res, error);
  });
  for (int i = 0; i < 1000 && !running; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_TRUE(running);
  const auto del = t.client()->Delete(("/v1/contexts/" + id).c_str());
  ASSERT_TRUE(del);
  EXPECT_EQ(del->status, 200);
  // Gone from the names at once (its memory not yet, unless the stream has ended meanwhile).
  expect_error(t.get("/v1/contexts/" + id), 404, "kv_context", "context_not_found");
  th.join();
  EXPECT_EQ(stream_text(streamed), alone["choices"][0]["text"].get<std::string>());
  EXPECT_NE(streamed.find("\"finish_reason\":\"length\""), std::string::npos) << streamed;
  // Its memory once its request ended.
  const std::string metrics = t.get("/metrics")->body;
  EXPECT_EQ(metric_value(metrics, "deferkv_contexts_resident"), 0);
  EXPECT_EQ(metric_value(metrics, "deferkv_context_bytes"), 0);
  EXPECT_EQ(metric_value(metrics, "deferkv_kv_bytes_reserved"), 0);
}

TEST(ServerContexts, IdleContextsAreDroppedLeastRecentlyUsedForARequestsMemory) {
  // Learn one context's bytes, then size the memory so that two contexts and the making of a
  // third (its whole prompt before eviction) do not fit together by one byte.
  int64_t ctx_bytes = 0, prompt_tokens = 0;
  {
    TestServer probe;
    const json c = make_context(probe, {{"prompt", kDocument}, {"kv_press", "snapkv"}, {"kv_budget", kBudget}});
    ctx_bytes = c["kv_bytes"];
    prompt_tokens = c["prompt_tokens"];
  }
  const ModelConfig& cfg = model().config();
  // f16 keys and values and an int32 position per entry (KvCache::bytes_per_entry).
  const int64_t per_token = cfg.n_layer * cfg.n_head_kv * (2 * 2 * cfg.head_dim + 4);
  ASSERT_EQ(ctx_bytes, cfg.n_layer * cfg.n_head_kv * kBudget * (2 * 2 * cfg.head_dim + 4));
  // What making one reserves (engine/kv_admission.h): snapkv evicts each layer once the whole
  // prompt has passed it, so one layer's whole prompt beside every layer's budget.
  const int64_t compress_peak = (prompt_tokens * per_token + cfg.n_layer - 1) / cfg.n_layer + kBudget * per_token;
  server::ServerOptions o = test_server_options();
  o.kv_memory_bytes = 2 * ctx_bytes + compress_peak - 1;  // a third context is made only if one goes
  TestServer t(o);
  const json body = {{"prompt", kDocument}, {"kv_press", "snapkv"}, {"kv_budget", kBudget}};
  const std::string a = make_context(t, body)["id"];
  const std::string b = make_context(t, body)["id"];
  ASSERT_EQ(complete(t, a, kQuestions[0]).status, 200);  // a is now the most recently used
  const std::string c = make_context(t, body)["id"];     // needs the room: b goes, not a
  EXPECT_EQ(t.get("/v1/contexts/" + a)->status, 200);
  EXPECT_EQ(t.get("/v1/contexts/" + b)->status, 404);
  EXPECT_EQ(t.get("/v1/contexts/" + c)->status, 200);
  const std::string metrics = t.get("/metrics")->body;
  EXPECT_EQ(metric_value(metrics, "deferkv_contexts_dropped_total"), 1);
  EXPECT_EQ(metric_value(metrics, "deferkv_contexts_resident"), 2);
  expect_error(t.post("/v1/completions", {{"kv_context", b}, {"prompt", "x"}}), 404, "kv_context", "context_not_found");
  EXPECT_EQ(metric_value(t.get("/metrics")->body, "deferkv_context_misses_total"), 1);
}

// A fresh directory for one test's --context-dir, removed at its end.
struct TempDir {
  TempDir() : path((std::filesystem::temp_directory_path() /
                    ("deferkv_ctxdir_" + std::to_string(::getpid()) + "_" +
                     ::testing::UnitTest::GetInstance()->current_test_info()->name())).string()) {
    std::filesystem::remove_all(path);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  std::string path;
};

TEST(ServerContexts, AContextDirKeepsContextsAcrossARestartAndSpillsIdleOnes) {
  TempDir dir;
  server::ServerOptions o = test_server_options();
  o.context_dir = dir.path;
  const json body = {{"prompt", kDocument}, {"kv_press", "snapkv"}, {"kv_budget", kBudget}};
  std::string id;
  Answer before;
  {
    TestServer t(o);
    id = make_context(t, body)["id"];
    before = complete(t, id, kQuestions[2]);
    ASSERT_EQ(before.status, 200);
  }
  EXPECT_TRUE(std::filesystem::exists(dir.path + "/" + id + ".dkvctx"));
  {
    TestServer t(o);  // a restart on the same directory
    const json listed = parse(t.get("/v1/contexts"));
    ASSERT_EQ(listed["data"].size(), 1u);
    EXPECT_EQ(listed["data"][0]["id"], id);
    EXPECT_EQ(listed["data"][0]["resident"], false);
    const Answer after = complete(t, id, kQuestions[2]);
    ASSERT_EQ(after.status, 200) << after.body;
    EXPECT_EQ(after.pieces, before.pieces);
    EXPECT_EQ(metric_value(t.get("/metrics")->body, "deferkv_context_loads_total"), 1);
    EXPECT_EQ(parse(t.get("/v1/contexts/" + id))["resident"], true);
    ASSERT_EQ(t.client()->Delete(("/v1/contexts/" + id).c_str())->status, 200);
    EXPECT_FALSE(std::filesystem::exists(dir.path + "/" + id + ".dkvctx"));
  }
  {
    // A file in the directory that is not a context: refused by name when a request names
    // it, and the server goes on.
    std::ofstream(dir.path + "/ctx-bad.dkvctx") << "not a context";
    TestServer t(o);
    const auto r = t.post("/v1/completions", {{"kv_context", "ctx-bad"}, {"prompt", "x"}});
    expect_error(r, 400, "");
    EXPECT_NE(r->body.find("ctx-bad.dkvctx"), std::string::npos) << r->body;
    const std::string made = make_context(t, body)["id"];
    EXPECT_EQ(complete(t, made, kQuestions[2]).pieces, before.pieces);
    ASSERT_EQ(t.client()->Delete("/v1/contexts/ctx-bad")->status, 200);
    ASSERT_EQ(t.client()->Delete(("/v1/contexts/" + made).c_str())->status, 200);
    EXPECT_TRUE(std::filesystem::is_empty(dir.path));
  }
  // Memory for two contexts beside the making of a third: the least recently used one is
  // spilled, not lost, and answers as before once loaded back.
  const json first = [&] {
    TestServer probe;
    return make_context(probe, body);
  }();
  const ModelConfig& cfg = model().config();
  const int64_t per_token = cfg.n_layer * cfg.n_head_kv * (2 * 2 * cfg.head_dim + 4);
  const int64_t compress_peak =
      (first["prompt_tokens"].get<int64_t>() * per_token + cfg.n_layer - 1) / cfg.n_layer + kBudget * per_token;
  o.kv_memory_bytes = 2 * first["kv_bytes"].get<int64_t>() + compress_peak - 1;
  TestServer t(o);
  const std::string a = make_context(t, body)["id"];
  const std::string b = make_context(t, body)["id"];
  const Answer b_before = complete(t, b, kQuestions[3]);
  ASSERT_EQ(complete(t, a, kQuestions[0]).status, 200);  // b is now the least recently used
  make_context(t, body);
  EXPECT_EQ(parse(t.get("/v1/contexts/" + b))["resident"], false);
  EXPECT_EQ(metric_value(t.get("/metrics")->body, "deferkv_contexts_spilled"), 1);
  const Answer b_after = complete(t, b, kQuestions[3]);
  ASSERT_EQ(b_after.status, 200) << b_after.body;
  EXPECT_EQ(b_after.pieces, b_before.pieces);
}

TEST(ServerContexts, BadInputIsRefusedByNameAndTheServerGoesOn) {
  TestServer t;
  expect_error(t.post("/v1/completions", {{"kv_context", "ctx-nope"}, {"prompt", "x"}}), 404, "kv_context",
               "context_not_found");
  expect_error(t.post("/v1/chat/completions", {{"kv_context", "ctx-nope"}, {"messages", {{{"role", "user"}, {"content", "x"}}}}}),
               404, "kv_context", "context_not_found");
  expect_error(t.post("/v1/completions", {{"kv_context", 3}, {"prompt", "x"}}), 400, "kv_context");
  expect_error(t.post("/v1/completions", {{"kv_context", ""}, {"prompt", "x"}}), 400, "kv_context");
  expect_error(t.post("/v1/completions", {{"kv_context", "ctx-x"}, {"kv_press", "snapkv"}, {"prompt", "x"}}), 400,
               "kv_press");
  expect_error(t.post("/v1/contexts", json::array()), 400, "");
  expect_error(t.post("/v1/contexts", {{"kv_press", "snapkv"}}), 400, "prompt");
  expect_error(t.post("/v1/contexts", {{"prompt", "a"}, {"messages", {{{"role", "user"}, {"content", "x"}}}}}), 400,
               "prompt");
  expect_error(t.post("/v1/contexts", {{"prompt", {"a", "b"}}}), 400, "prompt");
  expect_error(t.post("/v1/contexts", {{"prompt", kDocument}, {"kv_press", "no_such_press"}}), 400, "kv_press");
  expect_error(t.post("/v1/contexts", {{"prompt", kDocument}, {"kv_press", "snapkv"}, {"kv_budget", "many"}}), 400,
               "kv_budget");
  // A per-step press evicts while decoding: what it keeps would depend on the question
  // (deferkv makes a deferred context instead: ADeferredContextChoosesAtEachCompletionsStepD).
  expect_error(t.post("/v1/contexts", {{"prompt", kDocument}, {"kv_press", "tova"}, {"kv_budget", kBudget}}), 400,
               "kv_press");
  expect_error(t.post("/v1/contexts", {{"prompt", "x"}, {"kv_context", "ctx-a"}}), 400, "kv_context");
  // A context longer than the server's context.
  std::string long_text;
  for (int i = 0; i < 3000; ++i) long_text += " Lily";
  expect_error(t.post("/v1/contexts", {{"prompt", long_text}}), 400, "prompt", "context_length_exceeded");
  const std::string id = make_context(t, {{"prompt", kDocument}, {"kv_press", "snapkv"}, {"kv_budget", kBudget}})["id"];
  EXPECT_EQ(complete(t, id, kQuestions[0]).status, 200);  // still serving
}

TEST(ServerContexts, AContextThatCanNeverFitIsRefused) {
  server::ServerOptions o = test_server_options();
  const ModelConfig& cfg = model().config();
  const int64_t per_token = cfg.n_layer * cfg.n_head_kv * (2 * 2 * cfg.head_dim + 4);
  o.kv_memory_bytes = 20 * per_token;  // the document is longer than 20 tokens
  TestServer t(o);
  expect_error(t.post("/v1/contexts", {{"prompt", kDocument}, {"kv_press", "snapkv"}, {"kv_budget", kBudget}}), 400, "prompt",
               "kv_memory_exceeded");
  EXPECT_EQ(parse(t.post("/v1/completions", {{"prompt", "Once"}, {"max_tokens", 2}}))["choices"].size(), 1u);
}

}  // namespace
}  // namespace deferkv::testing
