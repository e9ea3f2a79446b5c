#include "generation.h"

namespace deferkv::python {

Generation::Generation(std::shared_ptr<Session> session, const std::vector<int32_t>& prompt,
                       const SamplerParams& sampling, int64_t max_tokens, Feed feed)
    : session_(std::move(session)),
      sampler_(sampling),
      // The text continues the prompt: its first piece keeps its leading space.
      decoder_(session_->model().tokenizer(), DecodeStart::kContinuation),
      max_tokens_(max_tokens),
      prompt_tokens_(static_cast<int64_t>(prompt.size())) {
  if (feed == Feed::kQuestion) {
    session_->prefill_question(prompt);
  } else {
    session_->prefill(prompt);
  }
  for (int32_t t : prompt) sampler_.accept(t);
}

Generation::Generation(std::shared_ptr<Session> session, const ::deferkv::CompressedContext& context,
                       const std::vector<int32_t>& question, const SamplerParams& sampling, int64_t max_tokens)
    : session_(std::move(session)),
      sampler_(sampling),
      decoder_(session_->model().tokenizer(), DecodeStart::kContinuation),
      max_tokens_(max_tokens),
      prompt_tokens_(static_cast<int64_t>(question.size())) {
  start_session(*session_, context);
  session_->prefill_question(question);
  for (int32_t t : context.tokens()) sampler_.accept(t);
  for (int32_t t : question) sampler_.accept(t);
}

// The steps of deferkv::generate() in the same order (so the tokens are the same): feed
// the previous token unless the context is full, stop at the token limit, sample, stop
// at the end of generation.
std::optional<std::pair<int32_t, std::string>> Generation::step() {
  if (stopped_) return std::nullopt;
  auto stop = [&](StopReason reason) {
    stopped_ = true;
    stop_ = reason;
    return std::nullopt;
  };
  if (pending_decode_) {
    if (session_->n_past() >= session_->n_ctx()) return stop(StopReason::kContextFull);
    session_->decode(tokens_.back());
    pending_decode_ = false;
  }
  if (max_tokens_ >= 0 && static_cast<int64_t>(tokens_.size()) >= max_tokens_) return stop(StopReason::kTokenLimit);
  const Tokenizer& tokenizer = session_->model().tokenizer();
  const int32_t token = sampler_.sample(session_->last_logits(), session_->model().config().n_vocab);
  sampler_.accept(token);
  if (tokenizer.is_end_of_generation(token)) return stop(StopReason::kEndOfGeneration);
  tokens_.push_back(token);
  pending_decode_ = true;
  if (tokenizer.token_kind(token) == TokenKind::kControl) return std::make_pair(token, std::string());
  return std::make_pair(token, decoder_.push(token));
}

std::string Generation::finish() { return decoder_.finish(); }

}  // namespace deferkv::python
