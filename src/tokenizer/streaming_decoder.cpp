#include "deferkv/tokenizer.h"
#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/utf8_scan.h"

namespace deferkv {

StreamingDecoder::StreamingDecoder(const Tokenizer& tokenizer) : tokenizer_(tokenizer) {}

std::string StreamingDecoder::push(int32_t id) {
  tokenizer_.impl_->append_piece(id, at_start_, held_);
  std::string out;
  size_t pos = 0;
  while (pos < held_.size()) {
    const Utf8Unit unit = scan_utf8(held_, pos);
    if (unit.status == Utf8Unit::kTruncated) break;  // wait for the rest of the character
    out.append(unit.status == Utf8Unit::kValid ? std::string_view(held_).substr(pos, unit.length)
                                               : kReplacementChar);
    pos += unit.length;
  }
  held_.erase(0, pos);
  return out;
}

std::string StreamingDecoder::finish() {
  std::string out = held_.empty() ? "" : std::string(kReplacementChar);
  held_.clear();
  at_start_ = true;
  return out;
}

}  // namespace deferkv
