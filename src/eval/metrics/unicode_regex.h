#pragma once
// A PCRE2 pattern compiled with UTF and UCP, so that \d, \w and \b mean what they mean
// in Python 3's `re` for str patterns: \d is any Unicode decimal digit (category Nd),
// \w any letter, number or underscore. Compiled once, usable from several threads.
#include <string>
#include <string_view>
#include <vector>

struct pcre2_real_code_8;

namespace deferkv::eval {

class UnicodeRegex {
 public:
  // Error naming the pattern if PCRE2 rejects it.
  explicit UnicodeRegex(std::string_view pattern);
  ~UnicodeRegex();
  UnicodeRegex(const UnicodeRegex&) = delete;
  UnicodeRegex& operator=(const UnicodeRegex&) = delete;

  // re.findall for patterns with at most one group: group 1 of each match if the pattern
  // has a group, else the whole match. Views into `text` (valid UTF-8).
  std::vector<std::string_view> find_all(std::string_view text) const;

  // re.sub(pattern, replacement, text) with a literal replacement.
  std::string replace_all(std::string_view text, std::string_view replacement) const;

 private:
  std::string pattern_;
  pcre2_real_code_8* code_ = nullptr;
  bool has_group_ = false;
};

}  // namespace deferkv::eval
