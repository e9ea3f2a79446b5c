#include "eval/metrics/porter_stemmer.h"

#include <functional>
#include <initializer_list>
#include <map>

namespace deferkv::eval {
namespace {

using Condition = std::function<bool(const std::string& stem)>;

// One suffix rule: a word ending in `suffix` whose remaining stem meets `condition`
// (none: always) becomes stem + `replacement`. The suffix "*d" stands for "ends in a
// double consonant", whose stem drops both letters.
struct Rule {
  std::string_view suffix;
  std::string replacement;
  Condition condition;
};

bool ends_with(std::string_view word, std::string_view suffix) {
  return word.size() >= suffix.size() && word.substr(word.size() - suffix.size()) == suffix;
}

std::string without_suffix(std::string_view word, size_t suffix_length) {
  return std::string(word.substr(0, word.size() - suffix_length));
}

bool is_vowel_letter(char c) { return c == 'a' || c == 'e' || c == 'i' || c == 'o' || c == 'u'; }

// A consonant is a letter other than a, e, i, o, u, and other than a y that follows a
// consonant.
bool is_consonant(std::string_view word, size_t i) {
  if (is_vowel_letter(word[i])) return false;
  if (word[i] == 'y') return i == 0 || !is_consonant(word, i - 1);
  return true;
}

// m in [C](VC){m}[V]: the number of vowel→consonant changes.
int measure(std::string_view stem) {
  int m = 0;
  for (size_t i = 1; i < stem.size(); ++i) {
    if (!is_consonant(stem, i - 1) && is_consonant(stem, i)) ++m;
  }
  return m;
}

bool has_positive_measure(const std::string& stem) { return measure(stem) > 0; }
bool measure_above_one(const std::string& stem) { return measure(stem) > 1; }

bool contains_vowel(std::string_view stem) {
  for (size_t i = 0; i < stem.size(); ++i) {
    if (!is_consonant(stem, i)) return true;
  }
  return false;
}

bool ends_double_consonant(std::string_view word) {
  const size_t n = word.size();
  return n >= 2 && word[n - 1] == word[n - 2] && is_consonant(word, n - 1);
}

// *o: ends consonant-vowel-consonant with the last not w, x or y; NLTK also counts a
// two-letter vowel-consonant word.
bool ends_cvc(std::string_view word) {
  const size_t n = word.size();
  if (n >= 3 && is_consonant(word, n - 3) && !is_consonant(word, n - 2) &&
      is_consonant(word, n - 1) && word[n - 1] != 'w' && word[n - 1] != 'x' && word[n - 1] != 'y') {
    return true;
  }
  return n == 2 && !is_consonant(word, 0) && is_consonant(word, 1);
}

// The first rule whose suffix matches decides: its condition failing leaves the word.
std::string apply_first_rule(const std::string& word, std::initializer_list<Rule> rules) {
  for (const Rule& rule : rules) {
    std::string stem;
    if (rule.suffix == "*d") {
      if (!ends_double_consonant(word)) continue;
      stem = without_suffix(word, 2);
    } else if (ends_with(word, rule.suffix)) {
      stem = without_suffix(word, rule.suffix.size());
    } else {
      continue;
    }
    if (rule.condition && !rule.condition(stem)) return word;
    return stem + rule.replacement;
  }
  return word;
}

std::string step1a(const std::string& word) {
  if (ends_with(word, "ies") && word.size() == 4) return without_suffix(word, 3) + "ie";
  return apply_first_rule(word, {{"sses", "ss", {}}, {"ies", "i", {}}, {"ss", "ss", {}}, {"s", "", {}}});
}

std::string step1b(const std::string& word) {
  if (ends_with(word, "ied")) return without_suffix(word, 3) + (word.size() == 4 ? "ie" : "i");
  if (ends_with(word, "eed")) {
    const std::string stem = without_suffix(word, 3);
    return measure(stem) > 0 ? stem + "ee" : word;
  }
  std::string stem;
  bool removed = false;
  for (std::string_view suffix : {std::string_view("ed"), std::string_view("ing")}) {
    if (ends_with(word, suffix) && contains_vowel(without_suffix(word, suffix.size()))) {
      stem = without_suffix(word, suffix.size());
      removed = true;
      break;
    }
  }
  if (!removed) return word;
  const char last = stem.back();
  return apply_first_rule(
      stem, {{"at", "ate", {}},
             {"bl", "ble", {}},
             {"iz", "ize", {}},
             {"*d", std::string(1, last),
              [last](const std::string&) { return last != 'l' && last != 's' && last != 'z'; }},
             {"", "e", [](const std::string& s) { return measure(s) == 1 && ends_cvc(s); }}});
}

std::string step1c(const std::string& word) {
  return apply_first_rule(word, {{"y", "i", [](const std::string& stem) {
                                    return stem.size() > 1 && is_consonant(stem, stem.size() - 1);
                                  }}});
}

std::string step2(const std::string& word) {
  if (ends_with(word, "alli") && has_positive_measure(without_suffix(word, 4))) {
    return step2(without_suffix(word, 4) + "al");
  }
  const Condition m0 = has_positive_measure;
  return apply_first_rule(
      word, {{"ational", "ate", m0}, {"tional", "tion", m0}, {"enci", "ence", m0},
             {"anci", "ance", m0},   {"izer", "ize", m0},    {"bli", "ble", m0},
             {"alli", "al", m0},     {"entli", "ent", m0},   {"eli", "e", m0},
             {"ousli", "ous", m0},   {"ization", "ize", m0}, {"ation", "ate", m0},
             {"ator", "ate", m0},    {"alism", "al", m0},    {"iveness", "ive", m0},
             {"fulness", "ful", m0}, {"ousness", "ous", m0}, {"aliti", "al", m0},
             {"iviti", "ive", m0},   {"biliti", "ble", m0},  {"fulli", "ful", m0},
             // The 'l' of -logi stays with the stem for the measure (geo-, theo-).
             {"logi", "log", [&word](const std::string&) {
                return has_positive_measure(without_suffix(word, 3));
              }}});
}

std::string step3(const std::string& word) {
  const Condition m0 = has_positive_measure;
  return apply_first_rule(word, {{"icate", "ic", m0}, {"ative", "", m0}, {"alize", "al", m0},
                                 {"iciti", "ic", m0}, {"ical", "ic", m0}, {"ful", "", m0},
                                 {"ness", "", m0}});
}

std::string step4(const std::string& word) {
  const Condition m1 = measure_above_one;
  return apply_first_rule(
      word, {{"al", "", m1},   {"ance", "", m1}, {"ence", "", m1}, {"er", "", m1},
             {"ic", "", m1},   {"able", "", m1}, {"ible", "", m1}, {"ant", "", m1},
             {"ement", "", m1}, {"ment", "", m1}, {"ent", "", m1},
             {"ion", "", [](const std::string& stem) {
                return measure(stem) > 1 && (stem.back() == 's' || stem.back() == 't');
              }},
             {"ou", "", m1},   {"ism", "", m1},  {"ate", "", m1},  {"iti", "", m1},
             {"ous", "", m1},  {"ive", "", m1},  {"ize", "", m1}});
}

std::string step5a(const std::string& word) {
  if (!ends_with(word, "e")) return word;
  const std::string stem = without_suffix(word, 1);
  if (measure(stem) > 1) return stem;
  if (measure(stem) == 1 && !ends_cvc(stem)) return stem;
  return word;
}

std::string step5b(const std::string& word) {
  return apply_first_rule(word, {{"ll", "l", [&word](const std::string&) {
                                    return measure(without_suffix(word, 1)) > 1;
                                  }}});
}

const std::map<std::string, std::string, std::less<>>& irregular_forms() {
  static const std::map<std::string, std::string, std::less<>> forms = {
      {"sky", "sky"},         {"skies", "sky"},       {"dying", "die"},
      {"lying", "lie"},       {"tying", "tie"},       {"news", "news"},
      {"innings", "inning"},  {"inning", "inning"},   {"outings", "outing"},
      {"outing", "outing"},   {"cannings", "canning"}, {"canning", "canning"},
      {"howe", "howe"},       {"proceed", "proceed"}, {"exceed", "exceed"},
      {"succeed", "succeed"}};
  return forms;
}

}  // namespace

std::string porter_stem(std::string_view word) {
  const auto& irregular = irregular_forms();
  if (auto it = irregular.find(word); it != irregular.end()) return it->second;
  std::string stem(word);
  if (stem.size() <= 2) return stem;
  stem = step1a(stem);
  stem = step1b(stem);
  stem = step1c(stem);
  stem = step2(stem);
  stem = step3(stem);
  stem = step4(stem);
  stem = step5a(stem);
  return step5b(stem);
}

}  // namespace deferkv::eval
