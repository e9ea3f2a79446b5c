#include "eval/metrics/unicode_regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <memory>

#include "deferkv/error.h"

namespace deferkv::eval {
namespace {

std::string pcre2_message(int code) {
  PCRE2_UCHAR buffer[256];
  pcre2_get_error_message(code, buffer, sizeof(buffer));
  return reinterpret_cast<const char*>(buffer);
}

struct MatchDataDeleter {
  void operator()(pcre2_match_data* data) const { pcre2_match_data_free(data); }
};

}  // namespace

UnicodeRegex::UnicodeRegex(std::string_view pattern) : pattern_(pattern) {
  int error = 0;
  PCRE2_SIZE offset = 0;
  code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                        PCRE2_UTF | PCRE2_UCP, &error, &offset, nullptr);
  if (code_ == nullptr) {
    fail("regex '{}' does not compile at offset {}: {}", pattern, offset, pcre2_message(error));
  }
  pcre2_jit_compile(code_, PCRE2_JIT_COMPLETE);  // the interpreter serves if JIT is missing
  uint32_t groups = 0;
  pcre2_pattern_info(code_, PCRE2_INFO_CAPTURECOUNT, &groups);
  if (groups > 1) fail("regex '{}' has {} groups; find_all takes at most one", pattern, groups);
  has_group_ = groups == 1;
}

UnicodeRegex::~UnicodeRegex() { pcre2_code_free(code_); }

std::vector<std::string_view> UnicodeRegex::find_all(std::string_view text) const {
  std::unique_ptr<pcre2_match_data, MatchDataDeleter> data(
      pcre2_match_data_create_from_pattern(code_, nullptr));
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  std::vector<std::string_view> found;
  size_t from = 0;
  while (from <= text.size()) {
    const int rc =
        pcre2_match(code_, subject, text.size(), from, PCRE2_NO_UTF_CHECK, data.get(), nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) fail("regex '{}' failed: {}", pattern_, pcre2_message(rc));
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(data.get());
    const size_t group = has_group_ ? 1 : 0;
    if (ovector[2 * group] != PCRE2_UNSET) {
      found.push_back(text.substr(ovector[2 * group], ovector[2 * group + 1] - ovector[2 * group]));
    }
    if (ovector[1] > ovector[0]) {
      from = ovector[1];
      continue;
    }
    // An empty match: step over one character before searching again.
    from = ovector[1] + 1;
    while (from < text.size() && (static_cast<uint8_t>(text[from]) & 0xC0) == 0x80) ++from;
  }
  return found;
}

std::string UnicodeRegex::replace_all(std::string_view text, std::string_view replacement) const {
  std::string out(text.size() + 64, '\0');
  for (int attempt = 0; attempt < 2; ++attempt) {
    PCRE2_SIZE length = out.size();
    const int rc = pcre2_substitute(
        code_, reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(), 0,
        PCRE2_SUBSTITUTE_GLOBAL | PCRE2_SUBSTITUTE_LITERAL | PCRE2_SUBSTITUTE_OVERFLOW_LENGTH |
            PCRE2_NO_UTF_CHECK,
        nullptr, nullptr, reinterpret_cast<PCRE2_SPTR>(replacement.data()), replacement.size(),
        reinterpret_cast<PCRE2_UCHAR*>(out.data()), &length);
    if (rc == PCRE2_ERROR_NOMEMORY) {
      out.resize(length);  // the length it needs
      continue;
    }
    if (rc < 0) fail("regex '{}' substitution failed: {}", pattern_, pcre2_message(rc));
    out.resize(length);
    return out;
  }
  fail("regex '{}' substitution does not fit", pattern_);
}

}  // namespace deferkv::eval
