#pragma once
// Splits text with a list of regexes the way Hugging Face's Split pre-tokenizer with
// "Isolated" behaviour does: each regex in turn is run over every piece the previous
// one left, and both its matches and the text between them become pieces.
// PCRE2 (UTF + Unicode properties, JIT) does the matching: it has the lookahead
// `\s+(?!\S)` needs and real Unicode categories for \p{L}, \p{N}, \s.
#include <string>
#include <string_view>
#include <vector>

struct pcre2_real_code_8;

namespace deferkv {

class RegexSplitter {
 public:
  // Error naming the pattern PCRE2 rejects.
  explicit RegexSplitter(const std::vector<std::string>& patterns);
  ~RegexSplitter();
  RegexSplitter(const RegexSplitter&) = delete;
  RegexSplitter& operator=(const RegexSplitter&) = delete;

  // `text` must be valid UTF-8. Pieces are views into `text`, in order, never empty.
  void split(std::string_view text, std::vector<std::string_view>& pieces) const;

 private:
  // Splits `piece` with pattern number `which`, appending to `out`.
  void split_one(size_t which, std::string_view piece, std::vector<std::string_view>& out) const;

  std::vector<pcre2_real_code_8*> codes_;
  std::vector<std::string> patterns_;  // for error messages
};

}  // namespace deferkv
