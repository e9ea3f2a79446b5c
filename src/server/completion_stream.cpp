#include "server/completion_stream.h"

#include <algorithm>

namespace deferkv::server {

CompletionStream::CompletionStream(const Tokenizer& tokenizer, DecodeStart start, std::vector<std::string> stop)
    : tokenizer_(tokenizer), decoder_(tokenizer, start), stop_(std::move(stop)) {
  for (const auto& s : stop_) longest_stop_ = std::max(longest_stop_, s.size());
}

double CompletionStream::seconds_since_start() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

void CompletionStream::start() {
  std::lock_guard lock(mutex_);
  started_ = true;
  changed_.notify_all();
}

bool CompletionStream::started() const {
  std::lock_guard lock(mutex_);
  return started_;
}

bool CompletionStream::wait_for_start(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  return changed_.wait_for(lock, timeout, [&] { return started_ || outcome_.has_value(); });
}

bool CompletionStream::push(int32_t token) {
  std::lock_guard lock(mutex_);
  if (!first_token_seconds_) first_token_seconds_ = seconds_since_start();
  // Control tokens (<s>, <|im_start|>) are not text, as `deferkv generate` prints them.
  if (tokenizer_.token_kind(token) != TokenKind::kControl) text_ += decoder_.push(token);
  release_text(false);
  changed_.notify_all();
  return !stopped_by_string_;
}

void CompletionStream::push_logprobs(const TokenLogprobs& logprobs) {
  std::lock_guard lock(mutex_);
  logprobs_.push_back(logprobs);
  offsets_.push_back(text_.size());
}

void CompletionStream::finish(const GenerationOutcome& outcome) {
  std::lock_guard lock(mutex_);
  if (!stopped_by_string_) text_ += decoder_.finish();
  release_text(true);
  outcome_ = outcome;
  changed_.notify_all();
}

void CompletionStream::release_text(bool all) {
  if (stopped_by_string_) return;
  // A stop string can only newly appear in the text not yet released, or across its start.
  const size_t from = released_ >= longest_stop_ ? released_ - longest_stop_ + 1 : 0;
  size_t cut = std::string::npos;
  for (const auto& s : stop_) cut = std::min(cut, text_.find(s, from));
  if (cut != std::string::npos) {
    text_.resize(cut);
    released_ = cut;
    stopped_by_string_ = true;
    return;
  }
  size_t end = text_.size();
  if (!all && longest_stop_ > 0) {
    end = text_.size() >= longest_stop_ - 1 ? text_.size() - (longest_stop_ - 1) : 0;
    // Never split a UTF-8 character: back up over continuation bytes.
    while (end > 0 && end < text_.size() && (static_cast<unsigned char>(text_[end]) & 0xC0) == 0x80) --end;
  }
  released_ = std::max(released_, end);
}

CompletionStream::Update CompletionStream::wait_for_update() {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [&] { return released_ > read_ || outcome_.has_value(); });
  return take_released();
}

CompletionStream::Update CompletionStream::wait_for_update(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  changed_.wait_for(lock, timeout, [&] { return released_ > read_ || outcome_.has_value(); });
  return take_released();
}

CompletionStream::Update CompletionStream::poll() {
  std::lock_guard lock(mutex_);
  return take_released();
}

CompletionStream::Update CompletionStream::take_released() {
  Update u;
  u.text = text_.substr(read_, released_ - read_);
  read_ = released_;
  u.ended = outcome_.has_value() && read_ == released_;
  // A token goes with the text it begins; at the end every remaining one but those cut
  // off with a stop string (whose text begins at or after the cut, text_'s end).
  while (logprobs_read_ < logprobs_.size() &&
         (offsets_[logprobs_read_] < read_ || (u.ended && !stopped_by_string_))) {
    u.logprobs.push_back(logprobs_[logprobs_read_]);
    u.text_offsets.push_back(offsets_[logprobs_read_]);
    ++logprobs_read_;
  }
  return u;
}

}  // namespace deferkv::server
