#include "eval/run/sample_runner.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "base/memory_stats.h"
#include "deferkv/compressed_context.h"
#include "deferkv/error.h"
#include "deferkv/generate.h"
#include "deferkv/tokenizer.h"
#include "eval/tasks/rng.h"

namespace deferkv::eval {

uint64_t sample_seed_of(uint64_t run_seed, const TaskSample& sample) {
  const int64_t which = sample.depth_percent >= 0 ? std::llround(sample.depth_percent * 1000) : sample.index;
  return sample_seed(run_seed, sample.task, sample.target_length, which);
}

SampleRunner::SampleRunner(std::shared_ptr<const Model> model, std::shared_ptr<const Model> draft,
                           std::shared_ptr<ThreadPool> pool, SamplerParams sampling, SessionOptions options,
                           bool question_agnostic, std::FILE* warnings, TurnMode turn_mode)
    : model_(std::move(model)), draft_(std::move(draft)), pool_(std::move(pool)), sampling_(sampling),
      options_(std::move(options)), question_agnostic_(question_agnostic), warnings_(warnings), turn_mode_(turn_mode) {}

// Q questions over one context, as a server answering them from a stored context would:
// the context is compressed once (CompressedContext::compress), then every turn starts a
// fresh Session from it. Question-agnostic: the context alone is compressed. Question-aware:
// the context with question 1 at its end (the press's window sees question 1 only, as in
// serving, where later questions are not known yet); turn 1 then decodes straight from the
// context, and turn k > 1 reads its question after question 1, which stays in the context.
// Multi-turn: turn k reads the earlier turns' questions and answers (those not already in
// the context) before its own, uncompressed.
SampleRun SampleRunner::run_turns(const SweepMethod& method, const TaskSample& sample) const {
  const auto split = sample.tokens.begin() + std::clamp<int64_t>(sample.context_tokens, 0, std::ssize(sample.tokens));
  std::vector<int32_t> context(sample.tokens.begin(), split);
  if (context.empty()) fail("{} sample {}: its prompt has no context part to share", sample.task, sample.index);
  const std::vector<int32_t>& first = sample.turns.front().question;
  const int64_t question_tokens = question_agnostic_ ? 0 : std::ssize(first);
  if (!question_agnostic_) context.insert(context.end(), first.begin(), first.end());
  // Room for the context, every question and every answer (multi-turn reads them all).
  int64_t n_ctx = std::ssize(context);
  for (const TaskTurn& turn : sample.turns) n_ctx += std::ssize(turn.question) + sample.max_new_tokens;
  SessionOptions options = options_;
  options.n_ctx = n_ctx;

  auto compressing = std::make_unique<Session>(model_, pool_, options);
  if (method.budget) compressing->set_press(make_press(method.press, *method.budget));
  if (const int64_t after = compressing->press_positions_after_prompt(std::ssize(context)); after > 0) {
    options.n_ctx += after;
    compressing = std::make_unique<Session>(model_, pool_, options);
    compressing->set_press(make_press(method.press, *method.budget));
  }
  const std::shared_ptr<const CompressedContext> shared =
      CompressedContext::compress(*compressing, context, question_tokens);

  SampleRun run;
  if (const auto& eviction = compressing->last_eviction()) run.kv_bytes_after_eviction = eviction->bytes;
  // A deferred context holds its pool (the whole context with pool=all) and the window's
  // scores until each question's step d: that is what it costs to keep.
  if (shared->deferred()) run.kv_bytes_after_eviction = shared->bytes();
  run.prefill_seconds = compressing->timings().prefill_seconds;
  run.capture_seconds = compressing->timings().capture_seconds;
  run.eviction_seconds = compressing->timings().eviction_seconds;
  run.peak_kv_bytes = compressing->kv_stats().peak_bytes;
  compressing.reset();

  const Tokenizer& tokenizer = model_->tokenizer();
  std::vector<int32_t> history;  // multi-turn: earlier turns' questions and answers not in the context
  for (size_t k = 0; k < sample.turns.size(); ++k) {
    std::vector<int32_t> question = history;
    if (k > 0 || question_agnostic_) {
      question.insert(question.end(), sample.turns[k].question.begin(), sample.turns[k].question.end());
    }
    Session session(model_, pool_, options);
    SamplerParams params = sampling_;
    params.seed = sample_seed_of(sampling_.seed, sample) + k;  // turn 1 draws as a sample of Q = 1 does
    Sampler sampler(params);
    GenerateOptions generate_options;
    generate_options.n_predict = sample.max_new_tokens;
    const GenerateResult result = generate(session, *shared, question, generate_options, sampler, [&](int32_t token) {
      return !(sample.stop_at_newline && tokenizer.token_piece(token).find('\n') != std::string::npos);
    });
    TurnRun turn;
    StreamingDecoder decoder(tokenizer);
    for (int32_t token : result.tokens) turn.prediction += decoder.push(token);
    turn.prediction += decoder.finish();
    if (sample.stop_at_newline) turn.prediction = turn.prediction.substr(0, turn.prediction.find('\n'));
    turn.generated_tokens = std::ssize(result.tokens);
    turn.stop = result.stop == StopReason::kCallback ? "newline" : stop_reason_name(result.stop);
    turn.read = question;
    turn.answer = result.tokens;
    run.turns.push_back(std::move(turn));
    if (turn_mode_ == TurnMode::kMultiTurn) {
      // What this turn read and answered, for the next turns to read.
      history = std::move(question);
      if (k == 0 && !question_agnostic_) history.clear();  // question 1 is in the context already
      history.insert(history.end(), result.tokens.begin(), result.tokens.end());
    }
    const SessionTimings& t = session.timings();
    run.prefill_seconds += t.prefill_seconds;
    run.decode_seconds += t.decode_seconds;
    run.decode_tokens += t.decode_tokens;
    run.peak_kv_bytes = std::max(run.peak_kv_bytes, session.kv_stats().peak_bytes);
  }
  run.prediction = run.turns.front().prediction;
  run.generated_tokens = run.turns.front().generated_tokens;
  run.stop = run.turns.front().stop;
  run.prefill_tokens_saved = static_cast<int64_t>(sample.turns.size() - 1) * sample.context_tokens;
  run.peak_rss_bytes = peak_rss_bytes();
  return run;
}

SampleRun SampleRunner::operator()(const SweepMethod& method, const TaskSample& sample, KeptSetRecorder* kept) const {
  if (!sample.turns.empty()) {
    if (kept != nullptr) fail("kept-token maps are not made for samples of several questions");
    return run_turns(method, sample);
  }
  const auto split = sample.tokens.begin() + std::clamp<int64_t>(sample.context_tokens, 0, std::ssize(sample.tokens));
  const std::vector<int32_t> context(sample.tokens.begin(), split), question(split, sample.tokens.end());
  if (question_agnostic_ && (context.empty() || question.empty())) {
    fail("{} sample {}: its prompt has no {} part to compress apart (question-agnostic mode)", sample.task, sample.index,
         context.empty() ? "context" : "question");
  }
  // The prompt the press compresses: the context alone in question-agnostic mode.
  const auto prompt = static_cast<int64_t>(question_agnostic_ ? context.size() : sample.tokens.size());
  const auto open_session = [&](int64_t after_prompt) {
    SessionOptions options = options_;
    options.n_ctx = static_cast<int64_t>(sample.tokens.size()) + sample.max_new_tokens + after_prompt;
    auto s = std::make_unique<Session>(model_, pool_, options);
    if (draft_) s->set_draft_model(draft_);
    if (method.budget) s->set_press(make_press(method.press, *method.budget));
    return s;
  };
  std::unique_ptr<Session> opened = open_session(0);
  // A press that runs positions after the prompt (LookaheadKV's rows, KVzip's reconstruction)
  // says how many once attached; the context then holds them too.
  if (const int64_t after = opened->press_positions_after_prompt(prompt); after > 0) opened = open_session(after);
  Session& session = *opened;
  if (method.budget) {
    // Once per row and length: such a row equals the full cache.
    const std::string row = fmt::format("{}@{}", method.label(), sample.target_length);
    const std::string warning = budget_covers_prompt_warning(*method.budget, prompt);
    if (!warning.empty() && warned_.insert(row).second && warnings_ != nullptr) {
      fmt::print(warnings_, "warning: {} at {} tokens: {}\n", method.label(), sample.target_length, warning);
    }
  }

  SamplerParams params = sampling_;
  params.seed = sample_seed_of(sampling_.seed, sample);
  Sampler sampler(params);

  const Tokenizer& tokenizer = model_->tokenizer();
  GenerateOptions generate_options;
  generate_options.n_predict = sample.max_new_tokens;
  generate_options.question_agnostic = question_agnostic_;
  if (kept != nullptr) kept->attach(generate_options);
  const GenerateResult result = generate(session, context, question, generate_options, sampler, [&](int32_t token) {
    if (kept != nullptr) kept->update(session);
    return !(sample.stop_at_newline && tokenizer.token_piece(token).find('\n') != std::string::npos);
  });
  if (kept != nullptr) kept->update(session);

  SampleRun run;
  // Bytes that form no character become U+FFFD, as Python's decode(errors="replace") does.
  StreamingDecoder decoder(tokenizer);
  for (int32_t token : result.tokens) run.prediction += decoder.push(token);
  run.prediction += decoder.finish();
  if (sample.stop_at_newline) run.prediction = run.prediction.substr(0, run.prediction.find('\n'));
  run.generated_tokens = static_cast<int64_t>(result.tokens.size());
  run.stop = result.stop == StopReason::kCallback ? "newline" : stop_reason_name(result.stop);
  const SessionTimings& t = session.timings();
  run.prefill_seconds = t.prefill_seconds;
  run.decode_seconds = t.decode_seconds;
  run.decode_tokens = t.decode_tokens;
  run.capture_seconds = t.capture_seconds;
  run.eviction_seconds = t.eviction_seconds;
  if (const auto& eviction = session.last_eviction()) run.kv_bytes_after_eviction = eviction->bytes;
  run.peak_kv_bytes = session.kv_stats().peak_bytes;
  if (session.press() != nullptr) {
    const int64_t pool =
        session.press()->holding(press_shape(session.model().config()), static_cast<int64_t>(sample.tokens.size())).pool;
    if (pool >= 0) {
      run.candidate_pool = pool;
    }
  }
  run.peak_rss_bytes = peak_rss_bytes();
  return run;
}

}  // namespace deferkv::eval
