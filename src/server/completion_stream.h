#pragma once
// One generation's text on its way from the scheduler's thread to the HTTP thread: tokens
// are detokenized as they come (whole UTF-8 characters only), stop strings are cut off
// (text that may be the start of one is held back until it is not), and the HTTP thread
// takes the text out in pieces, or waits for the end. With logprobs asked for, each
// token's log-probabilities go out with the piece where its text begins (OpenAI's shape:
// a chunk's logprobs are those of the tokens it carries); a token whose text lies wholly
// in a stop string, or after it, is not reported.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "deferkv/tokenizer.h"
#include "server/scheduler.h"

namespace deferkv::server {

class CompletionStream {
 public:
  CompletionStream(const Tokenizer& tokenizer, DecodeStart start, std::vector<std::string> stop);

  // Scheduler side. push() returns false once a stop string is met.
  void start();
  bool push(int32_t token);
  // The log-probabilities of the token pushed next.
  void push_logprobs(const TokenLogprobs& logprobs);
  void finish(const GenerationOutcome& outcome);

  // HTTP side: waits for more text or the end; returns the new text ("" at the end) and
  // whether the generation has ended (then outcome() is set).
  struct Update {
    std::string text;
    bool ended = false;
    std::vector<TokenLogprobs> logprobs;  // of the tokens whose text begins in `text`
    std::vector<size_t> text_offsets;     // where each begins in the whole text
  };
  Update wait_for_update();
  // The same, waiting at most `timeout` (then the update may be empty and not ended), so
  // that the HTTP thread can look at its client in between.
  Update wait_for_update(std::chrono::milliseconds timeout);
  // Waits at most `timeout` for the request to leave the queue (start()) or to end; true
  // when either happened.
  bool wait_for_start(std::chrono::milliseconds timeout);
  // Whether start() came before the end.
  bool started() const;
  // The same without waiting: the text released so far (tests read it token by token).
  Update poll();
  const GenerationOutcome& outcome() const { return *outcome_; }
  bool stopped_by_string() const { return stopped_by_string_; }
  // Seconds from construction to the first token (nullopt: none came).
  std::optional<double> first_token_seconds() const { return first_token_seconds_; }
  double seconds_since_start() const;

 private:
  // Moves text that can no longer start a stop string to the readable part.
  void release_text(bool all);
  Update take_released();  // with mutex_ held

  const Tokenizer& tokenizer_;
  StreamingDecoder decoder_;
  std::vector<std::string> stop_;
  size_t longest_stop_ = 0;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();

  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::string text_;        // everything decoded, cut at a stop string
  size_t released_ = 0;     // text_[0, released_) may be read
  size_t read_ = 0;         // text_[0, read_) has been read
  bool stopped_by_string_ = false;
  bool started_ = false;
  std::optional<double> first_token_seconds_;
  std::vector<TokenLogprobs> logprobs_;  // each pushed token's, when asked for
  std::vector<size_t> offsets_;          // where each token's text begins in text_
  size_t logprobs_read_ = 0;
  std::optional<GenerationOutcome> outcome_;
};

}  // namespace deferkv::server
