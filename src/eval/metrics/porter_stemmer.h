#pragma once
// The Porter stemmer in the variant Google's rouge_score uses: NLTK's
// `nltk.stem.porter.PorterStemmer()` in its default NLTK_EXTENSIONS mode (checked
// against NLTK 3.8). It departs from Porter's 1980 paper in these ways: a table of
// irregular forms (skies → sky, dying → die, news → news, …); words of one or two
// letters are left alone; -ies/-ied of four-letter words become -ie; -ied otherwise
// becomes -i; *o also holds for a two-letter vowel-consonant stem; y → i only after a
// consonant that is not the whole stem; step 2 takes -alli first (and runs again), uses
// -bli → -ble instead of -abli → -able, and adds -fulli → -ful and -logi → -log.
#include <string>
#include <string_view>

namespace deferkv::eval {

// The stem of a lower-case ASCII word.
std::string porter_stem(std::string_view word);

}  // namespace deferkv::eval
