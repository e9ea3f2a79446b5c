#pragma once
// The tokenizer's round trip on arbitrary bytes, shared by the two family targets: the
// input's first byte picks one of the target's vocabularies, the rest is the text.
//
// What the tokenizer promises (include/deferkv/tokenizer.h) and this asserts:
//   decode(encode(text)) == expected(text), where expected repairs invalid UTF-8 by
//   Unicode's maximal-subpart rule (each maximal ill-formed subpart becomes U+FFFD) and,
//   for SentencePiece vocabularies only, writes each U+2581 of the text as ' ': that
//   vocabulary spells a space as U+2581, so the two cannot be told apart after encoding.
// except, in SentencePiece vocabularies, for text holding a user-defined token's spelling
// (phi-3's "</s>", "<|assistant|>" ...): such tokens are matched even without
// parse_special, and the text after each gets a space put before it as at the start
// (tokenizer.h), so "a</s>b" comes back as "a</s> b";
// and, for every input, that the streaming decoder's pieces join to decode's text and
// that every id lies inside the vocabulary. Specials are neither added nor parsed:
// add_special would put BOS text in front, parse_special turns "<s>" into a control
// token whose text is not the input's.
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "deferkv/tokenizer.h"
#include "fuzz_support.h"

namespace deferkv::fuzz {

// Unicode 15 §3.9 Table 3-7 (well-formed byte sequences), written out independently of
// the tokenizer's own scanner: the second byte's range depends on the lead byte.
inline std::string repair_utf8_reference(std::string_view text) {
  std::string out;
  size_t i = 0;
  while (i < text.size()) {
    const auto lead = static_cast<uint8_t>(text[i]);
    size_t need = 0;
    uint8_t lo = 0x80, hi = 0xBF;  // the second byte's range
    if (lead < 0x80) {
      out += text[i++];
      continue;
    } else if (lead >= 0xC2 && lead <= 0xDF) {
      need = 1;
    } else if (lead >= 0xE0 && lead <= 0xEF) {
      need = 2;
      if (lead == 0xE0) lo = 0xA0;
      if (lead == 0xED) hi = 0x9F;
    } else if (lead >= 0xF0 && lead <= 0xF4) {
      need = 3;
      if (lead == 0xF0) lo = 0x90;
      if (lead == 0xF4) hi = 0x8F;
    } else {
      out += "\xEF\xBF\xBD";  // 80..C1, F5..FF never start a character
      ++i;
      continue;
    }
    size_t matched = 0;  // continuation bytes in range after the lead
    while (matched < need && i + 1 + matched < text.size()) {
      const auto b = static_cast<uint8_t>(text[i + 1 + matched]);
      const bool ok = matched == 0 ? (b >= lo && b <= hi) : (b >= 0x80 && b <= 0xBF);
      if (!ok) break;
      ++matched;
    }
    if (matched == need) {
      out.append(text.substr(i, need + 1));
    } else {
      out += "\xEF\xBF\xBD";
    }
    i += matched + 1;
  }
  return out;
}

inline std::string spaces_for_space_marks(std::string text) {
  std::string out;
  for (size_t i = 0; i < text.size();) {
    if (text.compare(i, 3, "\xE2\x96\x81") == 0) {
      out += ' ';
      i += 3;
    } else {
      out += text[i++];
    }
  }
  return out;
}

// True when a SentencePiece vocabulary's user-defined token is spelt in `text`.
inline bool holds_user_defined_token(const Tokenizer& tokenizer, std::string_view text) {
  if (tokenizer.model_name() != "llama") return false;
  for (int32_t id = 0; id < tokenizer.n_vocab(); ++id) {
    if (tokenizer.token_kind(id) == TokenKind::kUserDefined &&
        text.find(tokenizer.token_text(id)) != std::string_view::npos) {
      return true;
    }
  }
  return false;
}

inline void check_round_trip(const std::vector<std::unique_ptr<Tokenizer>>& tokenizers,
                             const uint8_t* data, size_t size) {
  if (size == 0) return;
  const Tokenizer& tokenizer = *tokenizers[data[0] % tokenizers.size()];
  const std::string_view text = as_text(data + 1, size - 1);
  const std::vector<int32_t> ids = tokenizer.encode(text, false, false);
  StreamingDecoder stream(tokenizer);
  std::string streamed;
  for (int32_t id : ids) {
    require(id >= 0 && id < tokenizer.n_vocab(), "encoded ids lie inside the vocabulary");
    streamed += stream.push(id);
  }
  streamed += stream.finish();
  const std::string decoded = tokenizer.decode(ids);
  std::string expected = repair_utf8_reference(text);
  if (tokenizer.model_name() == "llama") expected = spaces_for_space_marks(expected);
  require(streamed == decoded, "the streaming decoder's pieces join to decode's text");
  if (holds_user_defined_token(tokenizer, text)) return;
  if (decoded != expected) {
    std::fprintf(stderr, "vocabulary %zu (%s, %s): decoded %zu bytes, expected %zu\n",
                 data[0] % tokenizers.size(), tokenizer.model_name().c_str(),
                 tokenizer.pre_name().c_str(), decoded.size(), expected.size());
  }
  require(decoded == expected, "decode(encode(text)) is the repaired text");
}

}  // namespace deferkv::fuzz
