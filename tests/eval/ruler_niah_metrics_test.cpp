// RULER's string matching and the Needle-in-a-Haystack ROUGE-1 (with NLTK's Porter
// stemmer) on hand-computed cases.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "deferkv/error.h"
#include "deferkv/eval_metrics.h"
#include "eval/metrics/porter_stemmer.h"
#include "eval/metrics/rouge_1.h"
#include "eval/metrics/string_match.h"

namespace deferkv::eval {
namespace {

using Strings = std::vector<std::string>;

TEST(RulerMetric, PostprocessStripsAndTurnsControlCharactersIntoNewlines) {
  EXPECT_EQ(ruler_postprocess("  a\tb\x01\x1f  \n"), "a\nb");
  EXPECT_EQ(ruler_postprocess("\u00a0answer\u3000"), "answer");  // Unicode strip()
  EXPECT_EQ(ruler_postprocess("\x7f x"), "\x7f x");                // DEL is not in [\x00-\x1f]
}

TEST(RulerMetric, StringMatchIsAPlainCaseInsensitiveSubstringTest) {
  EXPECT_TRUE(contains_ignoring_case("The magic number is 93961587.", "3961587"));
  EXPECT_TRUE(contains_ignoring_case("ANSWER: PARIS", "paris"));
  EXPECT_TRUE(contains_ignoring_case("İSTANBUL", "i̇stanbul"));  // full lower-casing
  EXPECT_FALSE(contains_ignoring_case("STRASSE", "straße"));     // no case folding
  EXPECT_FALSE(contains_ignoring_case("New  York", "new york"));  // no whitespace fix
  EXPECT_TRUE(contains_ignoring_case("anything", ""));            // empty always matches
  EXPECT_TRUE(contains_ignoring_case("", ""));
}

TEST(RulerMetric, MatchAllCountsTheShareFoundMatchPartAny) {
  EXPECT_DOUBLE_EQ(string_match_all("123 and 456", Strings{"123", "456", "789"}), 2.0 / 3.0);
  EXPECT_EQ(string_match_part("the answer is Rome", Strings{"Paris", "Rome"}), 1.0);
  EXPECT_EQ(string_match_part("the answer is Rome", Strings{"Paris", "London"}), 0.0);
  EXPECT_THROW(string_match_all("x", Strings{}), Error);
  EXPECT_THROW(string_match_part("x", Strings{}), Error);
}

TEST(RulerMetric, TasksScoreAfterPostprocessing) {
  EXPECT_EQ(ruler_tasks().size(), 13u);
  EXPECT_EQ(ruler_metric("niah_multikey_3"), Metric::kStringMatchAll);
  EXPECT_EQ(ruler_metric("cwe"), Metric::kStringMatchAll);
  EXPECT_EQ(ruler_metric("qa_2"), Metric::kStringMatchPart);
  EXPECT_THROW(ruler_metric("niah"), Error);
  // The tab became a newline, so "a\tb" is no longer there.
  EXPECT_EQ(ruler_sample_score("vt", "a\tb", Strings{"a\tb"}), 0.0);
  EXPECT_EQ(ruler_sample_score("vt", "a\tb", Strings{"a\nb"}), 1.0);
  const std::vector<double> samples = {1, 0.5, 0};
  EXPECT_EQ(ruler_task_score(samples), 50.0);
  const std::vector<double> thirds = {1, 0, 0};
  EXPECT_EQ(ruler_task_score(thirds), 33.33);
}

TEST(NiahMetric, PorterStemmerHasNltksExtensions) {
  EXPECT_EQ(porter_stem("caresses"), "caress");
  EXPECT_EQ(porter_stem("ponies"), "poni");
  EXPECT_EQ(porter_stem("ties"), "tie");    // -ies of a 4-letter word → -ie
  EXPECT_EQ(porter_stem("died"), "die");    // -ied likewise
  EXPECT_EQ(porter_stem("spied"), "spi");
  EXPECT_EQ(porter_stem("skies"), "sky");   // irregular forms
  EXPECT_EQ(porter_stem("dying"), "die");
  EXPECT_EQ(porter_stem("news"), "news");
  EXPECT_EQ(porter_stem("happy"), "happi");
  EXPECT_EQ(porter_stem("enjoy"), "enjoy");  // y after a vowel stays
  EXPECT_EQ(porter_stem("geology"), "geolog");  // -logi → -log
  EXPECT_EQ(porter_stem("beautifulli"), "beauti");  // -fulli → -ful
  EXPECT_EQ(porter_stem("radicalli"), "radic");  // -alli first
  EXPECT_EQ(porter_stem("generalizations"), "gener");
  EXPECT_EQ(porter_stem("hopping"), "hop");
  EXPECT_EQ(porter_stem("falling"), "fall");
  EXPECT_EQ(porter_stem("filing"), "file");
  EXPECT_EQ(porter_stem("controll"), "control");
  EXPECT_EQ(porter_stem("ab"), "ab");  // one or two letters: left alone
}

TEST(NiahMetric, TokensAreLowerCaseAsciiRunsStemmedPastThreeLetters) {
  EXPECT_EQ(rouge_score_tokens("The best things, 3 sunny-days!"),
            (Strings{"the", "best", "thing", "3", "sunni", "day"}));
  // Non-ASCII letters separate tokens; İ lower-cases to i + U+0307, the Kelvin sign to k.
  EXPECT_EQ(rouge_score_tokens("café İx \u212a"), (Strings{"caf", "i", "x", "k"}));
  EXPECT_EQ(rouge_score_tokens("ties"), (Strings{"tie"}));
  EXPECT_EQ(rouge_score_tokens("tied"), (Strings{"tie"}));
  EXPECT_EQ(rouge_score_tokens("was"), (Strings{"was"}));  // 3 letters: not stemmed
}

TEST(NiahMetric, Rouge1FOnStemmedTokenCountsTimesTen) {
  const std::string needle =
      "The best thing to do in San Francisco is eat a sandwich and sit in Dolores Park on a sunny day.";
  EXPECT_EQ(niah_score(needle, needle), 10.0);
  EXPECT_EQ(niah_score("Sunny days", "sunny day"), 10.0);  // stemming makes them equal
  EXPECT_EQ(niah_score("I don't know.", needle), 0.0);
  EXPECT_EQ(niah_score("", needle), 0.0);
  // "a a b" against "a c": 1 shared token (min of the counts), P = 1/3, R = 1/2.
  EXPECT_DOUBLE_EQ(rouge_1("a a b", "a c"), 2 * (1.0 / 3) * 0.5 / (1.0 / 3 + 0.5));
}

}  // namespace
}  // namespace deferkv::eval
