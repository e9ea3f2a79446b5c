#pragma once
// Finds special-token text in the input before it is tokenized, so that
// "<|im_start|>user" becomes the token <|im_start|> followed by the text "user".
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/vocab.h"

namespace deferkv {

// A run of plain text (token == -1) or one special token found in the input.
struct TextFragment {
  std::string_view text;
  int32_t token = -1;
};

class SpecialTokenMatcher {
 public:
  // Matches user-defined tokens always, and control and unknown tokens too when
  // `with_control` (llama.cpp's parse_special; Hugging Face matches all added tokens).
  SpecialTokenMatcher(const Vocab& vocab, bool with_control);

  // Cuts `text` into fragments, taking at each position the longest token that starts
  // there (leftmost-longest, as Hugging Face's added-token matcher does). Whitespace a
  // token strips (Vocab::lstrip / rstrip) is dropped.
  void split(std::string_view text, std::vector<TextFragment>& out) const;

 private:
  struct Candidate {
    std::string text;
    int32_t id;
    bool lstrip, rstrip;
  };
  // Candidates by first byte, longest first.
  std::array<std::vector<Candidate>, 256> by_first_byte_;
  bool any_ = false;
};

}  // namespace deferkv
