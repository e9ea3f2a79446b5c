#include "eval/metrics/qa_f1.h"

#include <map>

#include "eval/metrics/python_text.h"
#include "eval/metrics/unicode_regex.h"
#include "eval/metrics/zh_words.h"

namespace deferkv::eval {
namespace {

// Python's string.punctuation.
constexpr std::string_view kAsciiPunctuation = R"(!"#$%&'()*+,-./:;<=>?@[\]^_`{|}~)";

// metrics.py's cn_punctuation; string.punctuation is added to it.
constexpr std::u32string_view kChinesePunctuation =
    U"！？｡。＂＃＄％＆＇（）＊＋，－／：；＜＝＞＠［＼］＾＿｀｛｜｝～｟｠｢｣､、〃》「」『』【】〔〕〖〗〘〙〚〛〜〝〞〟〰〾〿–—‘’‛“”„‟…‧﹏.";

std::string remove_ascii_punctuation(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    if (kAsciiPunctuation.find(c) == std::string_view::npos) out += c;
  }
  return out;
}

bool is_zh_punctuation(char32_t c) {
  return (c < 0x80 && kAsciiPunctuation.find(static_cast<char>(c)) != std::string_view::npos) ||
         kChinesePunctuation.find(c) != std::u32string_view::npos;
}

}  // namespace

std::string normalize_answer(std::string_view text) {
  static const UnicodeRegex kArticles(R"(\b(a|an|the)\b)");
  const std::string lowered = python_lower(text);
  return collapse_whitespace(kArticles.replace_all(remove_ascii_punctuation(lowered), " "));
}

std::string normalize_zh_answer(std::string_view text) {
  std::string out;
  for (char32_t c : to_code_points(python_lower(text))) {
    if (!is_zh_punctuation(c) && !is_python_space(c)) append_utf8(out, c);
  }
  return out;
}

double token_f1(const std::vector<std::string>& prediction, const std::vector<std::string>& reference) {
  std::map<std::string_view, size_t> reference_counts;
  for (const std::string& token : reference) ++reference_counts[token];
  size_t common = 0;
  for (const std::string& token : prediction) {
    auto it = reference_counts.find(token);
    if (it != reference_counts.end() && it->second > 0) {
      --it->second;
      ++common;
    }
  }
  if (common == 0) return 0.0;
  const double precision = 1.0 * static_cast<double>(common) / static_cast<double>(prediction.size());
  const double recall = 1.0 * static_cast<double>(common) / static_cast<double>(reference.size());
  return (2 * precision * recall) / (precision + recall);
}

double qa_f1(std::string_view prediction, std::string_view reference) {
  return token_f1(python_split(normalize_answer(prediction)),
                  python_split(normalize_answer(reference)));
}

double qa_f1_zh(std::string_view prediction, std::string_view reference) {
  const auto normalized_words = [](std::string_view text) {
    std::vector<std::string> words;
    for (const std::string& word : zh_words(text)) {
      std::string normalized = normalize_zh_answer(word);
      if (!normalized.empty()) words.push_back(std::move(normalized));
    }
    return words;
  };
  return token_f1(normalized_words(prediction), normalized_words(reference));
}

}  // namespace deferkv::eval
