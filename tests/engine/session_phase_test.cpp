// The session as a state machine (engine/session_phase.h): each step out of order is an
// Error naming the call and the phase and changes nothing; a press's host calls outside
// their point are refused the same way; and the phases a press sees (its points, its
// attention events' phase and step) follow the expected sequence in generate(), in a
// DeferKV d=2 run and in the batch engine.
//
// Mutants applied to the engine, run, seen failing, reverted (the tests that failed):
//   expect_phase accepts every phase                    -> StepsOutOfOrder* (set_press mid-prompt included),
//                                                          ASessionCalledFromItsPress*
//   kQuestion before the question's phase begins        -> ASessionCalledFromItsPress*
//   Host::at_prefill_end accepts a capability running   -> ACapabilityInsideACapabilityIsRefused
//   decode_segment stamps step decode_step_ (one early) -> StepsOutOfOrder*, PhasesOf*
//   the decode segment carries no layer_done            -> PhasesOf*
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "base/thread_pool.h"
#include "deferkv/batch_engine.h"
#include "deferkv/error.h"
#include "deferkv/generate.h"
#include "deferkv/press.h"
#include "deferkv/session.h"
#include "engine/session_driver.h"
#include "engine/session_internals.h"
#include "engine/session_phase.h"
#include "kv/kv_cache.h"
#include "model/forward_pass.h"
#include "model/test_models.h"
#include "observe/attention_tap.h"

namespace deferkv {
namespace {

std::shared_ptr<const Model> stories() {
  static const auto model = Model::load(testing::stories_model_path());
  return model;
}

SessionOptions small_batches() {
  SessionOptions o;
  o.n_ctx = 128;
  o.n_batch = 8;  // a prompt takes several chunks per layer
  return o;
}

std::vector<int32_t> prompt(int64_t n) {
  std::vector<int32_t> tokens;
  for (int64_t i = 0; i < n; ++i) tokens.push_back(static_cast<int32_t>(1 + (i * 37) % 500));
  return tokens;
}

// The message of the Error `call` throws; "" when it throws none.
template <typename Call>
std::string error_of(Call&& call) {
  try {
    call();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// Expects `call` to be refused with an error naming it and the phase, changing no phase.
#define EXPECT_REFUSED(call_expr, call_name, phase)                                         \
  do {                                                                                      \
    const std::string message = error_of([&] { call_expr; });                               \
    EXPECT_NE(message.find(call_name), std::string::npos) << #call_expr << ": " << message; \
    EXPECT_NE(message.find(session_phase_name(phase)), std::string::npos) << message;       \
    EXPECT_EQ(driver.phase(), phase) << #call_expr;                                         \
  } while (0)

void expect_refused_everything_but_the_next_step(Session& session, SessionPhase phase) {
  SessionDriver driver(session);
  const int32_t token = 5;
  if (phase != SessionPhase::kIdle) {
    EXPECT_REFUSED(session.prefill(prompt(4)), "a prefill", phase);
    EXPECT_REFUSED(session.prefill_question(prompt(4)), "a question", phase);
    EXPECT_REFUSED(session.decode(token), "a decode step", phase);
    EXPECT_REFUSED(driver.decode_segment(token), "a decode step", phase);
    EXPECT_REFUSED(session.set_press(nullptr), "set_press", phase);
    EXPECT_REFUSED(session.truncate(0), "truncate", phase);
    EXPECT_REFUSED(session.checkpoint(), "checkpoint", phase);
  }
  if (phase != SessionPhase::kPrefilling) EXPECT_REFUSED(driver.feed_prompt(prompt(4), 1), "feeding a prompt", phase);
  if (phase != SessionPhase::kPromptComplete) EXPECT_REFUSED(driver.end_prefill(prompt(4)), "ending a prefill", phase);
  if (phase != SessionPhase::kDecoding) EXPECT_REFUSED(driver.end_decode(0), "ending a decode step", phase);
}

// Every step out of order, from every phase a driver can leave a session in, with and
// without a press; the steps in order then run as if nothing had been tried.
TEST(SessionPhases, StepsOutOfOrderAreErrorsNamingTheCallAndThePhase) {
  for (const std::string spec : {"", "snapkv:window=4"}) {
    SCOPED_TRACE(spec);
    auto pool = std::make_shared<ThreadPool>(1);
    Session session(stories(), pool, small_batches());
    Session reference(stories(), pool, small_batches());
    if (!spec.empty()) {
      session.set_press(make_press(spec, KvBudget::per_head(8)));
      reference.set_press(make_press(spec, KvBudget::per_head(8)));
    }
    SessionDriver driver(session);
    const std::vector<int32_t> tokens = prompt(40);
    expect_refused_everything_but_the_next_step(session, SessionPhase::kIdle);
    driver.begin_prefill(tokens);
    EXPECT_EQ(driver.phase(), SessionPhase::kPrefilling);
    expect_refused_everything_but_the_next_step(session, SessionPhase::kPrefilling);
    int feeds = 1;
    while (!driver.feed_prompt(tokens, 8)) {
      EXPECT_EQ(driver.phase(), SessionPhase::kPrefilling);
      if (feeds++ == 2) expect_refused_everything_but_the_next_step(session, SessionPhase::kPrefilling);
    }
    EXPECT_GT(feeds, 2);
    EXPECT_EQ(driver.phase(), SessionPhase::kPromptComplete);
    expect_refused_everything_but_the_next_step(session, SessionPhase::kPromptComplete);
    driver.end_prefill(tokens);
    EXPECT_EQ(driver.phase(), SessionPhase::kIdle);
    const int32_t token = 7;
    const ForwardSegment segment = driver.decode_segment(token);
    EXPECT_EQ(driver.phase(), SessionPhase::kDecoding);
    EXPECT_EQ(segment.phase, PassPhase::kDecode);
    EXPECT_EQ(segment.step, 1);
    expect_refused_everything_but_the_next_step(session, SessionPhase::kDecoding);
    // The step's pass, as the batch engine runs it on a pass of its own.
    ForwardPass pass(stories()->config(), stories()->weights(), 1, session.n_ctx(), *pool);
    pass.run(std::span(&segment, 1));
    driver.end_decode(0);
    EXPECT_EQ(driver.phase(), SessionPhase::kIdle);
    // Nothing refused changed the session: its cache and logits are those of plain calls.
    reference.prefill(tokens);
    reference.decode(token);
    EXPECT_EQ(session.n_past(), reference.n_past());
    EXPECT_EQ(session.logits(), reference.logits());
    for (int64_t l = 0; l < kv_cache_of(session).n_layer(); ++l) {
      for (int64_t g = 0; g < kv_cache_of(session).n_head_kv(); ++g) {
        const KvCache& a = kv_cache_of(session);
        const KvCache& b = kv_cache_of(reference);
        EXPECT_EQ(std::vector<int32_t>(a.positions(l, g), a.positions(l, g) + a.length(l, g)),
                  std::vector<int32_t>(b.positions(l, g), b.positions(l, g) + b.length(l, g)));
      }
    }
  }
}

// A prompt's failure (here a token out of the vocabulary met by the forward pass) leaves
// the session idle, ready for the next prompt.
TEST(SessionPhases, AFailedStepLeavesTheSessionIdle) {
  auto pool = std::make_shared<ThreadPool>(1);
  Session session(stories(), pool, small_batches());
  SessionDriver driver(session);
  EXPECT_THROW(session.prefill(std::vector<int32_t>{1, 2, 100000}), Error);
  EXPECT_EQ(driver.phase(), SessionPhase::kIdle);
  EXPECT_THROW(session.decode(-1), Error);
  EXPECT_EQ(driver.phase(), SessionPhase::kIdle);
  session.prefill(prompt(10));
  session.decode(5);
  EXPECT_EQ(session.n_past(), 11);
}

// The name of each point, as the tests below call them.
std::string point_name(PressPoint point) {
  switch (point) {
    case PressPoint::kPromptBegin: return "prompt_begin";
    case PressPoint::kPromptLayerEnd: return "prompt_layer_end";
    case PressPoint::kPromptEnd: return "prompt_end";
    case PressPoint::kQuestion: return "question";
    case PressPoint::kDecodeLayerEnd: return "decode_layer_end";
    case PressPoint::kDecodeStep: return "decode_step";
  }
  return "?";
}

constexpr PressPoints kEveryPoint = {PressPoint::kPromptBegin,    PressPoint::kPromptLayerEnd, PressPoint::kPromptEnd,
                                     PressPoint::kQuestion,       PressPoint::kDecodeLayerEnd, PressPoint::kDecodeStep};

// A press that calls its host at `hook` ("on_attach" or a point's name) with `use`.
class HostCaller : public Press {
 public:
  using Use = std::function<void(PressHost&)>;
  HostCaller(std::string hook, Use use) : hook_(std::move(hook)), use_(std::move(use)) {}
  void on_attach(const PressModelShape&, PressHost& host) override {
    host_ = &host;
    at("on_attach");
  }
  PressPoints points() const override { return kEveryPoint; }
  void act(const PressAt& point, KvCache&) override { at(point_name(point.point)); }
  std::string describe() const override { return "host_caller"; }

 private:
  void at(const std::string& hook) {
    if (hook == hook_) use_(*host_);
  }
  std::string hook_;
  Use use_;
  PressHost* host_ = nullptr;
};

// What the session says when `hook` calls the host with `use` ("" when it lets it), and
// that the session is idle after it.
std::string host_error(const std::string& hook, const HostCaller::Use& use) {
  Session session(stories(), std::make_shared<ThreadPool>(1), small_batches());
  const std::string message = error_of([&] {
    session.set_press(std::make_unique<HostCaller>(hook, use));
    session.prefill(prompt(20));
    session.decode(5);
  });
  EXPECT_EQ(SessionDriver(session).phase(), SessionPhase::kIdle) << hook;
  return message;
}

TEST(SessionPhases, HostDeclarationsOutsideOnAttachAreRefused) {
  const std::map<std::string, HostCaller::Use> declarations = {
      {"reserve_after_prompt", [](PressHost& host) { host.reserve_after_prompt(4); }},
      {"reserve_prompt_length_after_prompt", [](PressHost& host) { host.reserve_prompt_length_after_prompt(4); }}};
  for (const auto& [name, declare] : declarations) {
    EXPECT_EQ(host_error("on_attach", declare), "");
    const std::map<std::string, SessionPhase> phases = {{"prompt_begin", SessionPhase::kPrefilling},
                                                        {"prompt_layer_end", SessionPhase::kPrefilling},
                                                        {"prompt_end", SessionPhase::kPromptEnd},
                                                        {"decode_step", SessionPhase::kDecoding}};
    for (const auto& [hook, phase] : phases) {
      const std::string message = host_error(hook, declare);
      EXPECT_NE(message.find(name + " outside on_attach"), std::string::npos) << hook << ": " << message;
      EXPECT_NE(message.find(session_phase_name(phase)), std::string::npos) << hook << ": " << message;
    }
  }
}

TEST(SessionPhases, CapabilitiesOutsideOnPrefillEndAreRefused) {
  const std::map<std::string, HostCaller::Use> capabilities = {
      {"input after the prompt",
       [](PressHost& host) { host.run_after_prompt(std::vector<int32_t>{3, 4}, [](const AttentionEvent&) {}); }},
      {"the prompt's tokens", [](PressHost& host) { host.prompt_tokens(); }}};
  for (const auto& [name, use] : capabilities) {
    EXPECT_EQ(host_error("prompt_end", use), "");
    const std::map<std::string, SessionPhase> phases = {{"on_attach", SessionPhase::kAttaching},
                                                        {"prompt_begin", SessionPhase::kPrefilling},
                                                        {"prompt_layer_end", SessionPhase::kPrefilling},
                                                        {"decode_step", SessionPhase::kDecoding}};
    for (const auto& [hook, phase] : phases) {
      const std::string message = host_error(hook, use);
      EXPECT_NE(message.find(name + " outside the prompt's end"), std::string::npos) << hook << ": " << message;
      EXPECT_NE(message.find(session_phase_name(phase)), std::string::npos) << hook << ": " << message;
    }
  }
}

// One capability at a time: a capability's observer that starts another is refused (before,
// the inner one ran, and its end marked the outer one's remaining passes as the prompt's own).
TEST(SessionPhases, ACapabilityInsideACapabilityIsRefused) {
  const auto nested = [](PressHost& host) {
    host.run_after_prompt(std::vector<int32_t>{3, 4}, [&host](const AttentionEvent& event) {
      if (event.layer == 0) host.refeed_last_token();
    });
  };
  const std::string message = host_error("prompt_end", nested);
  EXPECT_NE(message.find("outside the prompt's end"), std::string::npos) << message;
  EXPECT_NE(message.find(session_phase_name(SessionPhase::kCapability)), std::string::npos) << message;
}

// A press (a Python one, say) that calls its own session from a hook or from a capability's
// observer finds it in that hook's phase: the call is refused, and the session goes on.
TEST(SessionPhases, ASessionCalledFromItsPressIsRefused) {
  const std::map<std::string, SessionPhase> phases = {{"on_attach", SessionPhase::kAttaching},
                                                      {"prompt_begin", SessionPhase::kPrefilling},
                                                      {"prompt_layer_end", SessionPhase::kPrefilling},
                                                      {"prompt_end", SessionPhase::kPromptEnd},
                                                      {"capability", SessionPhase::kCapability},
                                                      {"question", SessionPhase::kQuestion},
                                                      {"decode_step", SessionPhase::kDecoding}};
  for (const auto& [hook, phase] : phases) {
    Session session(stories(), std::make_shared<ThreadPool>(1), small_batches());
    const auto call_session = [&session] { session.prefill(prompt(4)); };
    HostCaller::Use use = [&](PressHost&) { call_session(); };
    if (hook == "capability") {
      use = [&](PressHost& host) {
        host.run_after_prompt(std::vector<int32_t>{3}, [&](const AttentionEvent&) { call_session(); });
      };
    }
    const std::string message = error_of([&] {
      session.set_press(std::make_unique<HostCaller>(hook == "capability" ? "prompt_end" : hook, use));
      session.prefill(prompt(20));
      session.prefill_question(prompt(3));
      session.decode(5);
    });
    EXPECT_EQ(message, std::string("a prefill is not allowed while the session is ") + session_phase_name(phase))
        << hook;
    EXPECT_EQ(SessionDriver(session).phase(), SessionPhase::kIdle) << hook;
  }
}

// Records what a press (`inner`, which it passes what inner declared) is told: each point,
// each attention event's phase and step (runs of the same event collapsed), with the
// session's phase when the session is known. It declares every point, to record all the
// session calls.
class Recorder : public Press {
 public:
  Recorder(std::unique_ptr<Press> inner, std::vector<std::string>& log, Session* session = nullptr)
      : inner_(std::move(inner)), log_(log), session_(session) {}
  void on_attach(const PressModelShape& shape, PressHost& host) override {
    record("attach");
    inner_->on_attach(shape, host);
  }
  PressPoints points() const override { return kEveryPoint; }
  void on_attention(const AttentionEvent& event) override {
    static const char* const kPhases[] = {"prompt", "question", "decode", "capability"};
    record(std::string("attention ") + kPhases[static_cast<int>(event.phase)] + " step " +
           std::to_string(event.step) + " layer " + std::to_string(event.layer));
    inner_->on_attention(event);
  }
  void act(const PressAt& at, KvCache& cache) override {
    std::string entry = point_name(at.point);
    if (at.point == PressPoint::kDecodeLayerEnd) entry += " step " + std::to_string(at.step);
    if (at.point == PressPoint::kPromptLayerEnd || at.point == PressPoint::kDecodeLayerEnd) {
      entry += " layer " + std::to_string(at.layer);
    }
    if (at.point == PressPoint::kDecodeStep) entry += " " + std::to_string(at.step);
    record(entry);
    if (inner_->points().has(at.point)) inner_->act(at, cache);
  }
  std::string describe() const override { return inner_->describe(); }

 private:
  void record(std::string entry) {
    if (session_ != nullptr) entry += std::string(" [") + session_phase_name(SessionDriver(*session_).phase()) + "]";
    if (log_.empty() || log_.back() != entry) log_.push_back(std::move(entry));
  }
  std::unique_ptr<Press> inner_;
  std::vector<std::string>& log_;
  Session* session_;
};

// What a press that takes each prompt layer as it completes is told over generate() of
// n_predict tokens, each entry with the session's phase when `phases`.
std::vector<std::string> expected_log(int64_t n_layer, int64_t n_predict, bool phases) {
  const auto in = [&](const std::string& entry, SessionPhase phase) {
    return phases ? entry + " [" + session_phase_name(phase) + "]" : entry;
  };
  std::vector<std::string> log;
  log.push_back(in("attach", SessionPhase::kAttaching));
  log.push_back(in("prompt_begin", SessionPhase::kPrefilling));
  for (int64_t l = 0; l < n_layer; ++l) {
    log.push_back(in("attention prompt step 0 layer " + std::to_string(l), SessionPhase::kPrefilling));
    log.push_back(in("prompt_layer_end layer " + std::to_string(l), SessionPhase::kPrefilling));
  }
  log.push_back(in("prompt_end", SessionPhase::kPromptEnd));
  // Each token generated is fed back as a decode step (the first sampled from the prefill's logits).
  for (int64_t step = 1; step <= n_predict; ++step) {
    const std::string s = std::to_string(step);
    for (int64_t l = 0; l < n_layer; ++l) {
      log.push_back(in("attention decode step " + s + " layer " + std::to_string(l), SessionPhase::kDecoding));
      log.push_back(in("decode_layer_end step " + s + " layer " + std::to_string(l), SessionPhase::kDecoding));
    }
    log.push_back(in("decode_step " + s, SessionPhase::kDecoding));
  }
  return log;
}

struct Generated {
  std::vector<int32_t> tokens;
  std::vector<std::vector<int32_t>> kept;  // positions per (layer, KV head)
  std::optional<EvictionRecord> eviction;
};

Generated generate_with(const std::string& spec, int64_t n_predict, std::vector<std::string>* log) {
  Session session(stories(), std::make_shared<ThreadPool>(2), small_batches());
  std::unique_ptr<Press> press = make_press(spec, KvBudget::per_head(8));
  if (log != nullptr) press = std::make_unique<Recorder>(std::move(press), *log, &session);
  session.set_press(std::move(press));
  SamplerParams greedy;
  greedy.temperature = 0;
  Sampler sampler(greedy);
  GenerateOptions options;
  options.n_predict = n_predict;
  options.stop_at_end_of_generation = false;
  Generated out;
  out.tokens = generate(session, prompt(40), options, sampler).tokens;
  const KvCache& kv = kv_cache_of(session);
  for (int64_t l = 0; l < kv.n_layer(); ++l) {
    for (int64_t g = 0; g < kv.n_head_kv(); ++g) out.kept.emplace_back(kv.positions(l, g), kv.positions(l, g) + kv.length(l, g));
  }
  out.eviction = session.last_eviction();
  return out;
}

TEST(SessionPhases, PhasesOfAGenerate) {
  std::vector<std::string> log;
  const Generated recorded = generate_with("snapkv:window=4", 4, &log);
  EXPECT_EQ(log, expected_log(stories()->config().n_layer, 4, true));
  const Generated plain = generate_with("snapkv:window=4", 4, nullptr);
  EXPECT_EQ(recorded.tokens, plain.tokens);
  EXPECT_EQ(recorded.kept, plain.kept);
}

// DeferKV at d = 2 evicts at decode step 2, layer by layer as each finishes: the steps its
// hooks and attention events carry must be the session's own, or it evicts at another step.
TEST(SessionPhases, PhasesOfADeferKvRunAtD2) {
  std::vector<std::string> log;
  const Generated recorded = generate_with("deferkv:d=2,window=4", 5, &log);
  EXPECT_EQ(log, expected_log(stories()->config().n_layer, 5, true));
  const Generated plain = generate_with("deferkv:d=2,window=4", 5, nullptr);
  EXPECT_EQ(recorded.tokens, plain.tokens);
  EXPECT_EQ(recorded.kept, plain.kept);
  ASSERT_TRUE(recorded.eviction.has_value());
  EXPECT_EQ(recorded.eviction->decode_step, 2);
  EXPECT_EQ(recorded.eviction->n_past, 42);
}

// The batch engine drives its sequences through the same phases, whatever the other
// sequences sharing its forward passes do.
TEST(SessionPhases, PhasesOfABatchEngineRun) {
  auto pool = std::make_shared<ThreadPool>(2);
  BatchEngine engine(stories(), pool, {3, int64_t{1} << 30, small_batches()});
  std::vector<std::vector<std::string>> logs(2);
  std::vector<SequenceOutcome> outcomes(3);
  for (int i = 0; i < 3; ++i) {
    SequenceRequest r;
    r.prompt = prompt(40 - 8 * i);
    r.max_tokens = 4 + i;
    r.stop_at_end_of_generation = false;
    r.sampling.temperature = 0;
    r.budget = KvBudget::per_head(8);
    const char* spec = i == 1 ? "deferkv:d=2,window=4" : "snapkv:window=4";
    r.press = i < 2 ? std::make_unique<Recorder>(make_press(spec, r.budget), logs[i]) : make_press(spec, r.budget);
    SequenceCallbacks cb;
    cb.on_finish = [&outcomes, i](const SequenceOutcome& o) { outcomes[i] = o; };
    engine.submit(std::move(r), std::move(cb));
  }
  for (int steps = 0; engine.step(); ++steps) ASSERT_LT(steps, 1000);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(outcomes[i].error, "") << i;
  const int64_t n_layer = stories()->config().n_layer;
  EXPECT_EQ(logs[0], expected_log(n_layer, 4, false));
  EXPECT_EQ(logs[1], expected_log(n_layer, 5, false));
}

}  // namespace
}  // namespace deferkv
