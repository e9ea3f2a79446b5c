// Compressed contexts (deferkv/compressed_context.h): a session started from one answers
// as compress/answer (generate in question-agnostic mode on one session) answers, alone, on
// 8 threads at once and after a save and a load; a file made for another model, press or
// cache type is refused naming the mismatch, and a corrupt or truncated one names the file.
//
// Mutants applied, run, seen failing, reverted (the tests that failed):
//   start_from sets the position to the context's token count rather than its n_past
//   (ignores key re-rotation)                 -> AnswersAsCompressAnswer (streaming_llm:rerotate=true)
//   save() writes each head's key shift as none (q8_0 rows lose their shift)
//                                             -> SavedAndLoadedAnswersAsInMemory
//   read() skips the entry count's check against the bytes left (the count then reaches a
//   later check)                              -> CraftedCountIsRefusedBeforeAllocating
#include "deferkv/compressed_context.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include <unistd.h>

#include "base/sha256.h"
#include "base/thread_pool.h"
#include "deferkv/error.h"
#include "deferkv/tokenizer.h"
#include "engine/story_context.h"
#include "model/test_models.h"
#include "kv/kv_cache.h"

namespace deferkv {
namespace {

constexpr int64_t kAnswerTokens = 12;
constexpr int64_t kBudget = 40;  // entries per KV head, above the window-scored methods' window of 32

// A model and its document and questions: stories260K (head_dim 8) for its real text, a
// random model with head_dim 64 for the quantised cache types.
using Setup = testing::ContextSetup;

const Setup& stories() {
  static const Setup s =
      testing::story_context({" What color was the ball?", " Where was the dog?", " Who called Lily home?"});
  return s;
}

const Setup& random64() {
  static const Setup s = [] {
    RandomModelSpec spec;
    spec.seed = 21;
    Setup s{Model::load(testing::random_model_path(spec)), {}, {}};
    std::mt19937 rng(4);
    std::uniform_int_distribution<int32_t> id(3, static_cast<int32_t>(s.model->config().n_vocab) - 1);
    for (int i = 0; i < 120; ++i) s.document.push_back(id(rng));
    for (int q = 0; q < 3; ++q) {
      s.questions.emplace_back();
      for (int i = 0; i < 6; ++i) s.questions.back().push_back(id(rng));
    }
    return s;
  }();
  return s;
}

SessionOptions options(const std::string& cache_type) {
  SessionOptions o;
  o.n_ctx = 512;
  o.cache_type_k = o.cache_type_v = cache_type;
  return o;
}

std::unique_ptr<Session> new_session(const Setup& setup, const std::string& press, const std::string& cache_type) {
  auto s = std::make_unique<Session>(setup.model, std::make_shared<ThreadPool>(1), options(cache_type));
  if (press != "full") s->set_press(make_press(press, KvBudget::per_head(kBudget)));
  return s;
}

std::vector<int32_t> greedy(Session& session, const Setup& setup, const CompressedContext* context, int q) {
  SamplerParams p;
  p.temperature = 0;
  Sampler sampler(p);
  GenerateOptions g;
  g.n_predict = kAnswerTokens;
  g.stop_at_end_of_generation = false;
  g.question_agnostic = true;
  const std::vector<int32_t>& question = setup.questions[static_cast<size_t>(q) % setup.questions.size()];
  return context ? generate(session, *context, question, g, sampler).tokens
                 : generate(session, setup.document, question, g, sampler).tokens;
}

// compress/answer: one session with the press, the context compressed and the question read after it.
std::vector<int32_t> compress_answer(const Setup& setup, const std::string& press, const std::string& cache_type, int q) {
  return greedy(*new_session(setup, press, cache_type), setup, nullptr, q);
}

std::shared_ptr<const CompressedContext> compress(const Setup& setup, const std::string& press,
                                                  const std::string& cache_type) {
  return CompressedContext::compress(*new_session(setup, press, cache_type), setup.document);
}

std::vector<int32_t> answer(const Setup& setup, const CompressedContext& context, const std::string& cache_type, int q) {
  return greedy(*new_session(setup, "full", cache_type), setup, &context, q);
}

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("deferkv_ctx_" + std::to_string(::getpid()) + "_" + name)).string();
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}
void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

struct Case {
  const Setup& setup;
  std::string press, cache_type;
};

TEST(CompressedContext, AnswersAsCompressAnswer) {
  for (const Case& c : {Case{stories(), "snapkv", "f16"}, Case{stories(), "streaming_llm:rerotate=true", "f32"},
                        Case{stories(), "full", "f16"}, Case{random64(), "knorm", "q8_0"},
                        Case{random64(), "snapkv", "q4_0"}}) {
    SCOPED_TRACE(c.press + " " + c.cache_type);
    const auto context = compress(c.setup, c.press, c.cache_type);
    const int64_t heads = c.setup.model->config().n_layer * c.setup.model->config().n_head_kv;
    if (c.press == "full") {
      EXPECT_EQ(context->kept_entries(), heads * static_cast<int64_t>(c.setup.document.size()));
    } else {
      EXPECT_EQ(context->kept_entries(), heads * kBudget);  // the budget, in every head
    }
    EXPECT_EQ(context->tokens(), c.setup.document);
    EXPECT_EQ(context->mode(), ContextMode::kQuestionAgnostic);
    EXPECT_EQ(context->cache_type_k(), c.cache_type);
    for (int q = 0; q < 2; ++q) {
      const std::vector<int32_t> expected = compress_answer(c.setup, c.press, c.cache_type, q);
      ASSERT_EQ(expected.size(), static_cast<size_t>(kAnswerTokens));
      EXPECT_EQ(answer(c.setup, *context, c.cache_type, q), expected) << "question " << q;
    }
  }
}

TEST(CompressedContext, EightSessionsOnEightThreadsAnswerAsAlone) {
  for (const Case& c : {Case{stories(), "snapkv", "f16"}, Case{random64(), "snapkv", "q8_0"}}) {
    const auto context = compress(c.setup, c.press, c.cache_type);
    std::vector<std::vector<int32_t>> alone, together(8);
    for (int i = 0; i < 8; ++i) alone.push_back(answer(c.setup, *context, c.cache_type, i));
    std::vector<std::thread> threads;
    for (int i = 0; i < 8; ++i) {
      threads.emplace_back([&, i] { together[static_cast<size_t>(i)] = answer(c.setup, *context, c.cache_type, i); });
    }
    for (auto& t : threads) t.join();
    for (int i = 0; i < 8; ++i) EXPECT_EQ(together[static_cast<size_t>(i)], alone[static_cast<size_t>(i)]) << "thread " << i;
  }
}

TEST(CompressedContext, SavedAndLoadedAnswersAsInMemory) {
  for (const Case& c : {Case{random64(), "snapkv", "q8_0"}, Case{stories(), "streaming_llm:rerotate=true", "f16"}}) {
    SCOPED_TRACE(c.press);
    const auto context = compress(c.setup, c.press, c.cache_type);
    const std::string path = temp_path("roundtrip.dkvctx");
    context->save(path);
    const auto loaded = CompressedContext::load(path, *c.setup.model);
    std::remove(path.c_str());
    EXPECT_EQ(loaded->tokens(), context->tokens());
    EXPECT_EQ(loaded->press(), context->press());
    EXPECT_EQ(loaded->model_sha256(), sha256_file(c.setup.model->path()));
    EXPECT_EQ(loaded->n_past(), context->n_past());
    EXPECT_EQ(loaded->kept_entries(), context->kept_entries());
    EXPECT_EQ(loaded->bytes(), context->bytes());
    for (int q = 0; q < 2; ++q) {
      EXPECT_EQ(answer(c.setup, *loaded, c.cache_type, q), compress_answer(c.setup, c.press, c.cache_type, q));
    }
  }
}

TEST(CompressedContext, RefusesAPressThatEvictsAfterThePrefill) {
  // deferkv makes a deferred context instead (deferred_context_test.cpp).
  for (const std::string press : {"snapkv:d=2", "tova", "snapkv+moment_kv"}) {
    const auto session = new_session(stories(), press, "f16");
    EXPECT_NE(error_of([&] { CompressedContext::compress(*session, stories().document); }).find("evicts after the prefill"),
              std::string::npos) << press;
  }
}

TEST(CompressedContext, RefusesAnotherModelPressOrCacheType) {
  const auto context = compress(stories(), "snapkv", "f16");
  const std::string path = temp_path("mismatch.dkvctx");
  context->save(path);
  const std::string wrong_model = error_of([&] { CompressedContext::load(path, *random64().model); });
  EXPECT_NE(wrong_model.find("another model"), std::string::npos) << wrong_model;
  EXPECT_NE(wrong_model.find(path), std::string::npos) << wrong_model;
  EXPECT_NE(wrong_model.find(sha256_file(random64().model->path())), std::string::npos) << wrong_model;
  const std::string wrong_press = error_of([&] { context->check_made_with("knorm", "f16", "f16"); });
  EXPECT_NE(wrong_press.find("'" + context->press() + "'"), std::string::npos) << wrong_press;
  EXPECT_NE(wrong_press.find("'knorm'"), std::string::npos) << wrong_press;
  EXPECT_NE(error_of([&] { context->check_made_with(context->press(), "f32", "f16"); }).find("not f32/f16"),
            std::string::npos);
  const auto f32 = new_session(stories(), "full", "f32");
  EXPECT_NE(error_of([&] { start_session(*f32, *context); }).find("the session as f32/f32"), std::string::npos);
  const auto with_press = new_session(stories(), "snapkv", "f16");
  EXPECT_NE(error_of([&] { start_session(*with_press, *context); }).find("without a press"), std::string::npos);
  std::remove(path.c_str());
}

// Rewrites a file's header so that its checksum and size match a changed payload.
std::string with_header_for(const std::string& file, const std::string& payload) {
  constexpr size_t kHeader = 88;
  std::string out = file.substr(0, 16);
  const uint64_t n = payload.size();
  out.append(reinterpret_cast<const char*>(&n), 8);
  out += sha256_hex(payload);
  EXPECT_EQ(out.size(), kHeader);
  return out + payload;
}

TEST(CompressedContext, CorruptOrTruncatedFilesNameTheFile) {
  const auto context = compress(stories(), "snapkv", "f16");
  const std::string path = temp_path("corrupt.dkvctx");
  context->save(path);
  const std::string good = read_bytes(path);
  const auto refused = [&](const std::string& bytes, const std::string& expected) {
    write_bytes(path, bytes);
    const std::string e = error_of([&] { CompressedContext::read(path); });
    EXPECT_NE(e.find(path), std::string::npos) << e;
    EXPECT_NE(e.find(expected), std::string::npos) << e;
  };
  std::string flipped = good;
  flipped[flipped.size() / 2] ^= 0x20;
  refused(flipped, "does not match its SHA-256");
  refused(good.substr(0, good.size() - 7), "truncated");
  refused(good.substr(0, 40), "not a compressed context");
  refused("", "not a compressed context");
  std::string version = good;
  version[8] = 3;
  refused(version, "format version 3");
  refused(good + "x", "trailing bytes");
  std::remove(path.c_str());
}

TEST(CompressedContext, CraftedCountIsRefusedBeforeAllocating) {
  const auto context = compress(stories(), "snapkv", "f16");
  const std::string path = temp_path("crafted.dkvctx");
  context->save(path);
  const std::string good = read_bytes(path);
  std::string payload = good.substr(88);
  // The token count follows the strings, the mode, the shape and the position.
  size_t at = 0;
  for (int s = 0; s < 4; ++s) {
    uint32_t n;
    std::memcpy(&n, payload.data() + at, 4);
    at += 4 + n;
  }
  at += 1 + 12 + 8;
  uint64_t tokens;
  std::memcpy(&tokens, payload.data() + at, 8);
  ASSERT_EQ(tokens, stories().document.size());
  const uint64_t huge = uint64_t{1} << 60;
  std::memcpy(payload.data() + at, &huge, 8);
  write_bytes(path, with_header_for(good, payload));
  const std::string e = error_of([&] { CompressedContext::read(path); });
  EXPECT_NE(e.find("token count says 1152921504606846976"), std::string::npos) << e;
  // The first head's entry count: after the tokens and the logits.
  std::memcpy(payload.data() + at, &tokens, 8);
  const size_t logits_at = at + 8 + tokens * 4;
  uint64_t n_logits;
  std::memcpy(&n_logits, payload.data() + logits_at, 8);
  ASSERT_EQ(n_logits, static_cast<uint64_t>(stories().model->config().n_vocab));
  const size_t head_at = logits_at + 8 + n_logits * 4;
  std::memcpy(payload.data() + head_at, &huge, 8);
  write_bytes(path, with_header_for(good, payload));
  const std::string h = error_of([&] { CompressedContext::read(path); });
  EXPECT_NE(h.find("a head's entry count says"), std::string::npos) << h;
  std::remove(path.c_str());
}

}  // namespace
}  // namespace deferkv
