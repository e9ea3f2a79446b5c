#include "deferkv/generate.h"

#include "deferkv/tokenizer.h"

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

GenerateResult generate(Session& session, const std::vector<int32_t>& prompt,
                        const GenerateOptions& options, Sampler& sampler,
                        const std::function<bool(int32_t)>& on_token) {
  GenerateResult result;
  session.prefill(prompt);
  if (options.after_prefill) options.after_prefill(session);
  for (int32_t t : prompt) sampler.accept(t);
  const Tokenizer& tokenizer = session.model().tokenizer();
  const int64_t n_vocab = session.model().config().n_vocab;
  for (;;) {
    if (options.n_predict >= 0 && static_cast<int64_t>(result.tokens.size()) >= options.n_predict) {
      result.stop = StopReason::kTokenLimit;
      break;
    }
    const int32_t token = sampler.sample(session.last_logits(), n_vocab);
    sampler.accept(token);
    if (options.stop_at_end_of_generation && tokenizer.is_end_of_generation(token)) {
      result.stop = StopReason::kEndOfGeneration;
      break;
    }
    result.tokens.push_back(token);
    if (on_token && !on_token(token)) {
      result.stop = StopReason::kCallback;
      break;
    }
    if (session.n_past() >= session.n_ctx()) {
      result.stop = StopReason::kContextFull;
      break;
    }
    session.decode(token);
  }
  return result;
}

}  // namespace deferkv
