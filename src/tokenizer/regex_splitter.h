#pragma once
// Splits text with a list of regexes the way Hugging Face's Split pre-tokenizer with
// "Isolated" behaviour does: each regex in turn is run over every piece the previous
// one left, and both its matches and the text between them become pieces.
// PCRE2 (UTF + Unicode properties, JIT) does the matching: it has the lookahead
// `\s+(?!\S)` needs and real Unicode categories for \p{L}, \p{N}, \s.
#include <functional>
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

  using PieceFn = std::function<void(std::string_view)>;

  // Calls `emit` with each piece of `text` (valid UTF-8), in order: views into `text`,
  // never empty. Pieces are handed out as they are found, so a long text is never held
  // as a list of pieces.
  void split(std::string_view text, const PieceFn& emit) const;

 private:
  // Splits `piece` with pattern number `which` and each part with the later patterns.
  void split_from(size_t which, std::string_view piece, const PieceFn& emit) const;

  std::vector<pcre2_real_code_8*> codes_;
  std::vector<std::string> patterns_;  // for error messages
};

}  // namespace deferkv
