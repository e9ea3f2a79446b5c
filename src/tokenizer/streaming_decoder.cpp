#include "deferkv/tokenizer.h"
#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/utf8_scan.h"

namespace deferkv {

StreamingDecoder::StreamingDecoder(const Tokenizer& tokenizer, DecodeStart start)
    : tokenizer_(tokenizer), start_(start), at_start_(start == DecodeStart::kNewText) {}

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
  at_start_ = start_ == DecodeStart::kNewText;
  return out;
}

}  // namespace deferkv
