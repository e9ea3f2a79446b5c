#include "deferkv/generate.h"

#include "deferkv/error.h"
#include "deferkv/tokenizer.h"
#include "engine/generation_step.h"

namespace deferkv {

const char* stop_reason_name(StopReason reason) {
  switch (reason) {
    case StopReason::kEndOfGeneration: return "end_of_generation";
    case StopReason::kTokenLimit: return "token_limit";
    case StopReason::kContextFull: return "context_full";
    case StopReason::kCallback: return "stopped";
  }
  return "?";
}

void prefill_prompt(Session& session, const std::vector<int32_t>& context, const std::vector<int32_t>& question,
                    bool question_agnostic) {
  if (question_agnostic) {
    if (question.empty()) {
      fail("question-agnostic mode compresses the context before the question is read: it needs a question "
           "(give it apart from the context)");
    }
    session.prefill(context);
    session.prefill_question(question);
    return;
  }
  if (question.empty()) {
    session.prefill(context);
    return;
  }
  std::vector<int32_t> prompt = context;
  prompt.insert(prompt.end(), question.begin(), question.end());
  session.prefill(prompt, static_cast<int64_t>(question.size()));
}

const char* question_mode_name(bool question_agnostic) {
  return question_agnostic ? "question-agnostic" : "question-aware";
}

std::optional<int32_t> next_token_to_decode(const Session& session, Sampler& sampler, const GenerateOptions& options,
                                            GenerateResult& result, const std::function<bool(int32_t)>& on_token) {
  if (options.n_predict >= 0 && static_cast<int64_t>(result.tokens.size()) >= options.n_predict) {
    result.stop = StopReason::kTokenLimit;
    return std::nullopt;
  }
  const int32_t token = sampler.sample(session.last_logits(), session.model().config().n_vocab);
  sampler.accept(token);
  if (options.stop_at_end_of_generation && session.model().tokenizer().is_end_of_generation(token)) {
    result.stop = StopReason::kEndOfGeneration;
    return std::nullopt;
  }
  result.tokens.push_back(token);
  if (on_token && !on_token(token)) {
    result.stop = StopReason::kCallback;
    return std::nullopt;
  }
  if (session.n_past() >= session.n_ctx()) {
    result.stop = StopReason::kContextFull;
    return std::nullopt;
  }
  return token;
}

GenerateResult generate(Session& session, const std::vector<int32_t>& prompt,
                        const GenerateOptions& options, Sampler& sampler,
                        const std::function<bool(int32_t)>& on_token) {
  return generate(session, prompt, {}, options, sampler, on_token);
}

GenerateResult generate(Session& session, const std::vector<int32_t>& context, const std::vector<int32_t>& question,
                        const GenerateOptions& options, Sampler& sampler,
                        const std::function<bool(int32_t)>& on_token) {
  GenerateResult result;
  prefill_prompt(session, context, question, options.question_agnostic);
  if (options.after_prefill) options.after_prefill(session);
  for (int32_t t : context) sampler.accept(t);
  for (int32_t t : question) sampler.accept(t);
  while (const std::optional<int32_t> token = next_token_to_decode(session, sampler, options, result, on_token)) {
    session.decode(*token);
  }
  return result;
}

}  // namespace deferkv
