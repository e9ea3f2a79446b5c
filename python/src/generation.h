#pragma once
// One generation driven a token at a time from Python: the session, the sampler and the
// streaming decoder. Each step runs the engine with the GIL released; the Python side
// loops over the steps (checking stop strings and Ctrl-C between them).
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "deferkv/compressed_context.h"
#include "deferkv/generate.h"
#include "deferkv/sampler.h"
#include "deferkv/session.h"
#include "deferkv/tokenizer.h"

namespace deferkv::python {

class Generation {
 public:
  // How the prompt is fed: as a prompt, or as the question after a context the session
  // holds compressed (Session::prefill_question, question-agnostic mode).
  enum class Feed { kPrompt, kQuestion };
  // Feeds `prompt` (with the press already set on `session`) and readies the sampler.
  Generation(std::shared_ptr<Session> session, const std::vector<int32_t>& prompt,
             const SamplerParams& sampling, int64_t max_tokens, Feed feed = Feed::kPrompt);
  // Starts `session` (fresh, no press) from `context` and reads `question` after it, as
  // deferkv::generate(session, context, question, ...) does.
  Generation(std::shared_ptr<Session> session, const ::deferkv::CompressedContext& context,
             const std::vector<int32_t>& question, const SamplerParams& sampling, int64_t max_tokens);

  // The next token and its text, or nothing once generation stopped. A control token's
  // text is empty (as `deferkv generate` prints them only with --special).
  std::optional<std::pair<int32_t, std::string>> step();
  // Text the decoder still holds (an unfinished character), once generation stopped.
  std::string finish();

  const std::vector<int32_t>& tokens() const { return tokens_; }
  StopReason stop_reason() const { return stop_; }
  bool stopped() const { return stopped_; }
  uint64_t seed() const { return sampler_.seed(); }
  int64_t prompt_tokens() const { return prompt_tokens_; }
  const Session& session() const { return *session_; }

 private:
  std::shared_ptr<Session> session_;
  Sampler sampler_;
  StreamingDecoder decoder_;
  int64_t max_tokens_;
  int64_t prompt_tokens_;
  std::vector<int32_t> tokens_;
  bool pending_decode_ = false;  // the last token is not yet in the cache
  bool stopped_ = false;
  StopReason stop_ = StopReason::kTokenLimit;
};

}  // namespace deferkv::python
