#pragma once
// Server-sent events as OpenAI-compatible servers stream completions: "data: <payload>"
// lines, an empty line ending each event, "data: [DONE]" the last. Bytes arrive in pieces
// that cut events anywhere; the reader keeps the unfinished tail for the next piece.
#include <string>
#include <string_view>
#include <vector>

namespace deferkv::client {

class SseReader {
 public:
  // The payloads of the events that `bytes` completes, in order. Lines other than "data:"
  // (comments ": ...", "event:", "id:") are skipped; an event with several data lines
  // joins them with "\n", as the SSE specification says; "\r\n" ends a line as "\n" does.
  std::vector<std::string> feed(std::string_view bytes);
  // Bytes of an event not yet ended by its empty line.
  bool has_partial_event() const { return !pending_.empty() || !data_.empty() || has_data_; }

 private:
  std::string pending_;  // the current line, not yet ended
  std::string data_;     // the current event's data lines so far
  bool has_data_ = false;
};

}  // namespace deferkv::client
