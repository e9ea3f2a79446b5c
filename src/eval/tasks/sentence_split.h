#pragma once
// Sentences of whitespace-normalised English prose, where RULER's essay haystack (NLTK's
// Punkt, `sent_tokenize`) may put needles. Not Punkt: a sentence ends at a word ending in
// '.', '?' or '!' (closing quotes and brackets allowed after it) and followed by a space,
// unless the word is a common abbreviation, an initial ("J.") or dotted ("e.g.", "U.S.").
// Joining the sentences with single spaces gives the text back.
#include <string>
#include <string_view>
#include <vector>

namespace deferkv::eval {

std::vector<std::string> split_sentences(std::string_view text);

}  // namespace deferkv::eval
