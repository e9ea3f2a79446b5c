#include "tokenizer/regex_splitter.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "deferkv/error.h"

namespace deferkv {
namespace {

std::string pcre2_message(int code) {
  PCRE2_UCHAR buffer[256];
  pcre2_get_error_message(code, buffer, sizeof(buffer));
  return reinterpret_cast<const char*>(buffer);
}

// Match data and a JIT stack per thread: a compiled pattern may be shared by threads,
// these may not. The JIT stack grows to 8 MiB so long runs of whitespace (which
// `\s+(?!\S)` backtracks over) match instead of failing.
struct ThreadMatchState {
  pcre2_match_data* data = pcre2_match_data_create(1, nullptr);
  pcre2_jit_stack* stack = pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, nullptr);
  pcre2_match_context* context = pcre2_match_context_create(nullptr);
  ThreadMatchState() { pcre2_jit_stack_assign(context, nullptr, stack); }
  ~ThreadMatchState() {
    pcre2_match_context_free(context);
    pcre2_jit_stack_free(stack);
    pcre2_match_data_free(data);
  }
};

ThreadMatchState& match_state() {
  thread_local ThreadMatchState state;
  return state;
}

}  // namespace

RegexSplitter::RegexSplitter(const std::vector<std::string>& patterns) : patterns_(patterns) {
  for (const auto& pattern : patterns) {
    int error = 0;
    PCRE2_SIZE offset = 0;
    pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                     PCRE2_UTF | PCRE2_UCP, &error, &offset, nullptr);
    if (code == nullptr) {
      for (auto* c : codes_) pcre2_code_free(c);
      fail("pre-tokenizer regex '{}' does not compile at offset {}: {}", pattern, offset,
           pcre2_message(error));
    }
    // Without JIT (an unsupported CPU) pcre2_match falls back to the interpreter.
    pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
    codes_.push_back(code);
  }
}

RegexSplitter::~RegexSplitter() {
  for (auto* code : codes_) pcre2_code_free(code);
}

void RegexSplitter::split(std::string_view text, const PieceFn& emit) const {
  if (!text.empty()) split_from(0, text, emit);
}

void RegexSplitter::split_from(size_t which, std::string_view piece, const PieceFn& emit) const {
  if (which == codes_.size()) {
    emit(piece);
    return;
  }
  // One match data per thread serves every level: the deeper levels overwrite it, so
  // each match's bounds are copied out before going down.
  ThreadMatchState& state = match_state();
  const pcre2_code* code = codes_[which];
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(piece.data());
  size_t pos = 0;  // where the unmatched text starts
  size_t from = 0;
  while (from < piece.size()) {
    const int rc = pcre2_match(code, subject, piece.size(), from, PCRE2_NO_UTF_CHECK, state.data,
                               state.context);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      fail("pre-tokenizer regex '{}' failed on a {}-byte piece: {}", patterns_[which],
           piece.size(), pcre2_message(rc));
    }
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(state.data);
    const size_t start = ovector[0], end = ovector[1];
    if (end == start) {
      // An empty match splits nothing; step over one character and search again.
      from = start + 1;
      while (from < piece.size() && (static_cast<uint8_t>(piece[from]) & 0xC0) == 0x80) ++from;
      continue;
    }
    if (start > pos) split_from(which + 1, piece.substr(pos, start - pos), emit);
    split_from(which + 1, piece.substr(start, end - start), emit);
    pos = from = end;
  }
  if (pos < piece.size()) split_from(which + 1, piece.substr(pos), emit);
}

}  // namespace deferkv
