#include "client/sse_events.h"

namespace deferkv::client {

std::vector<std::string> SseReader::feed(std::string_view bytes) {
  std::vector<std::string> events;
  for (char c : bytes) {
    if (c != '\n') {
      pending_ += c;
      continue;
    }
    std::string_view line = pending_;
    if (line.ends_with('\r')) line.remove_suffix(1);
    if (line.empty()) {  // the event ends
      if (has_data_) events.push_back(std::move(data_));
      data_.clear();
      has_data_ = false;
    } else if (line.starts_with("data:")) {
      line.remove_prefix(5);
      if (line.starts_with(' ')) line.remove_prefix(1);
      if (has_data_) data_ += '\n';
      data_ += line;
      has_data_ = true;
    }
    pending_.clear();
  }
  return events;
}

}  // namespace deferkv::client
