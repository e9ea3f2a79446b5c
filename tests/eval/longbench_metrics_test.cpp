// LongBench's metrics on hand-computed cases, one test per quirk of the official
// scorers (docs/evaluation.md, "Quirks of the official scorers").
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "deferkv/error.h"
#include "deferkv/eval_metrics.h"
#include "eval/metrics/classification.h"
#include "eval/metrics/code_sim.h"
#include "eval/metrics/number_match.h"
#include "eval/metrics/qa_f1.h"
#include "eval/metrics/rouge_l.h"
#include "eval/metrics/zh_words.h"

namespace deferkv::eval {
namespace {

// rouge 1.0.1's F: 2 · P·R / (P + R + 1e-8).
double rouge_f(double p, double r) { return 2.0 * ((p * r) / (p + r + 1e-8)); }

TEST(LongBenchMetric, QaF1DeletesOnlyAsciiPunctuationAndArticles) {
  EXPECT_EQ(normalize_answer("The BERT-base model."), "bertbase model");
  EXPECT_EQ(normalize_answer("“Quoted” — text"), "“quoted” — text");
  // '_' is punctuation, deleted before the article pass; \b is Unicode-aware, so the
  // "the" inside "thé" and "éthe" is no article.
  EXPECT_EQ(normalize_answer("thé the éthe a_b An"), "thé éthe ab");
  EXPECT_DOUBLE_EQ(qa_f1("The BERT-base model", "bertbase"), 2.0 / 3.0);
  EXPECT_EQ(qa_f1("The BERT-base model", "BERT base"), 0.0);
}

TEST(LongBenchMetric, QaF1LowerCasesFullUnicode) {
  // İ → i + U+0307, word-final Σ → ς (str.lower(), no case folding: ß stays).
  EXPECT_EQ(normalize_answer("İSTANBUL ΟΔΟΣ Straße"), "i̇stanbul οδος straße");
  EXPECT_EQ(qa_f1("ΟΔΟΣ", "οδοσ"), 0.0);
  EXPECT_EQ(qa_f1("STRASSE", "Straße"), 0.0);
}

TEST(LongBenchMetric, QaF1SplitsOnNbspButNotZeroWidthSpace) {
  EXPECT_EQ(qa_f1("x\u00a0y z", "x y z"), 1.0);
  // "x\u200by" stays one token: 1 common of 2 predicted and 3 reference tokens.
  EXPECT_DOUBLE_EQ(qa_f1("x\u200by z", "x y z"), 2 * 0.5 * (1.0 / 3) / (0.5 + 1.0 / 3));
}

TEST(LongBenchMetric, QaF1CountsTokensAsMultisets) {
  // yes×2 no×1 against yes×1 no×2: 2 in common, P = R = 2/3.
  EXPECT_DOUBLE_EQ(qa_f1("yes yes no", "yes no no"), 2.0 / 3.0);
  EXPECT_EQ(qa_f1("", "anything"), 0.0);
  EXPECT_EQ(qa_f1("the a an", "the"), 0.0);  // nothing left to share
}

TEST(LongBenchMetric, RougeSplitsSentencesOnEveryPeriod) {
  // "U.S." is the sentences "U" and "S": the same words as "U S".
  EXPECT_EQ(rouge_l("U.S.", "U S"), rouge_f(1, 1));
  // "3.5" is "3" and "5"; against "3.5 percent" (sentences "3", "5 percent") all of the
  // reference's 3 distinct words but "percent" are found.
  EXPECT_EQ(rouge_l("3.5", "3.5 percent"), rouge_f(1, 2.0 / 3));
}

TEST(LongBenchMetric, RougeOfIdenticalTextsIsJustBelowOne) {
  const double same = rouge_l("the cat sat on the mat", "the cat sat on the mat");
  EXPECT_EQ(same, rouge_f(1, 1));
  EXPECT_LT(same, 1.0);
  EXPECT_NEAR(same, 0.999999995, 1e-15);
}

TEST(LongBenchMetric, RougeTrailingSpaceAfterPeriodIsAnEmptyToken) {
  // "word. " → sentences "word" and "" → words {"word", ""}: P = 1/2.
  EXPECT_EQ(rouge_l("word. ", "word"), rouge_f(0.5, 1));
  EXPECT_EQ(rouge_l("word.", "word"), rouge_f(1, 1));
}

TEST(LongBenchMetric, RougeCountsDistinctTokens) {
  // Set semantics: "a a a b b" has 2 distinct words, all in the reference.
  EXPECT_EQ(rouge_l("a a a b b", "a b a b"), rouge_f(1, 1));
}

TEST(LongBenchMetric, RougeBacktrackTiesDecideWhichTokensCount) {
  // Reference sentences "a b" and "b", prediction "b a". LCS("a b", "b a") has length 1
  // either way; the back-track meets a tie at (2,2), goes left and keeps "b". So only
  // "b" is in the union: P = R = 1/2.
  EXPECT_EQ(rouge_l("b a", "a b. b"), rouge_f(0.5, 0.5));
  // The other way round the reference "b a" picks up "a" from "a b" and "b" from "b".
  EXPECT_EQ(rouge_l("a b. b", "b a"), rouge_f(1, 1));
}

TEST(LongBenchMetric, RougeIsCaseSensitiveAndKeepsPunctuationOnWords) {
  EXPECT_EQ(rouge_l("The Cat sat", "the cat sat"), rouge_f(1.0 / 3, 1.0 / 3));
  EXPECT_EQ(rouge_l("cat, dog", "cat dog"), rouge_f(0.5, 0.5));
}

TEST(LongBenchMetric, RougeOfEmptyOrPeriodOnlyTextIsZero) {
  EXPECT_EQ(rouge_l("", "a b c"), 0.0);
  EXPECT_EQ(rouge_l("...", "a b c"), 0.0);
  EXPECT_EQ(rouge_l("a b c", ".."), 0.0);
}

TEST(LongBenchMetric, RougeIsZeroWhereThePythonBacktrackOverflowsTheStack) {
  // Reference r0..r(k-1), prediction p0..p(k-1) r0: the back-track climbs k rows to the
  // shared r0, k + 1 recursive frames. CPython's limit lets 990 through.
  const auto words = [](char prefix, int k) {
    std::string s;
    for (int i = 0; i < k; ++i) s += fmt::format("{}{} ", prefix, i);
    return s;
  };
  const auto score = [&](int k) { return rouge_l(words('p', k) + "r0", words('r', k)); };
  EXPECT_EQ(score(989), rouge_f(1.0 / 990, 1.0 / 989));
  EXPECT_EQ(score(990), 0.0);
}

TEST(LongBenchMetric, ClassificationMatchesClassNamesAsSubstrings) {
  const std::vector<std::string> classes = {"State", "Country", "City"};
  // "State" is found inside "United States".
  EXPECT_EQ(classification("United States", "Country", classes), 0.0);
  EXPECT_EQ(classification("United States", "State", classes), 1.0);
  EXPECT_EQ(classification("City or Country", "City", classes), 0.5);
  EXPECT_EQ(classification("city", "City", classes), 0.0);  // case-sensitive
}

TEST(LongBenchMetric, ClassificationSkipsTheEntryAfterEachRemoval) {
  // Matches: Other, location, Other location. "Other" is part of the ground truth and is
  // removed; the loop then moves past "location" (now at the removed one's place), so it
  // stays: 2 matches left, score 1/2 (1 without the quirk).
  const std::vector<std::string> classes = {"Other", "location", "Other location", "City"};
  EXPECT_EQ(classification("Other location", "Other location", classes), 0.5);
  // In another order both parts are looked at and removed.
  const std::vector<std::string> reordered = {"Other", "Other location", "location"};
  EXPECT_EQ(classification("Other location", "Other location", reordered), 1.0);
}

TEST(LongBenchMetric, ClassificationKnowsTheTruncatedTrecClass) {
  const std::vector<std::string> classes = {"Lasting time of somethin", "Description of something"};
  EXPECT_EQ(classification("Lasting time of something", "Lasting time of somethin", classes), 1.0);
  const std::vector<std::string> answers = {"x"};
  EXPECT_THROW(score_sample(Metric::kClassification, "x", answers, {}), Error);
}

TEST(LongBenchMetric, RetrievalAndCountTreatEveryUnicodeDigitRunAsANumber) {
  EXPECT_EQ(retrieval("Paragraph 12", "Paragraph 12"), 1.0);
  EXPECT_EQ(retrieval("Paragraph ١٢ or 12", "Paragraph 12"), 0.5);  // Arabic-Indic digits
  EXPECT_EQ(retrieval("１２", "Paragraph 12"), 0.0);                // full-width digits
  EXPECT_EQ(retrieval("112", "Paragraph 12"), 0.0);
  EXPECT_EQ(retrieval("none", "Paragraph 12"), 0.0);
  EXPECT_EQ(retrieval_zh("答案是段落3", "段落3"), 1.0);
  EXPECT_THROW(retrieval("12", "12"), Error);
  EXPECT_DOUBLE_EQ(count_match("There are 5 paragraphs, 5 unique, not 4", "5"), 2.0 / 3.0);
  EXPECT_EQ(count_match("٥", "5"), 0.0);
  EXPECT_EQ(count_match("05", "5"), 0.0);
}

TEST(LongBenchMetric, CodeSimTakesTheFirstLineWithoutCommentMarks) {
  EXPECT_EQ(first_code_line("\n\n# c\n// d\n```\nreturn 1\nx"), "return 1");
  EXPECT_EQ(first_code_line("url = 'http://x'\ny"), "y");
  EXPECT_EQ(first_code_line("x = 1\r\ny = 2"), "x = 1\r");  // the '\r' stays
  EXPECT_EQ(first_code_line("# only a comment"), "");
  // "x = 1\r" against "x = 1": (11 − 1) / 11 → 91.
  EXPECT_EQ(code_sim("x = 1\r\ny = 2", "x = 1"), 0.91);
  EXPECT_EQ(code_sim("# only a comment", "x = 1"), 0.0);
  EXPECT_EQ(code_sim("# only a comment", ""), 1.0);  // fuzz.ratio("", "") is 100
}

TEST(LongBenchMetric, FuzzRatioIsTheIndelRatioRoundedHalfToEven) {
  EXPECT_EQ(indel_distance(U"kitten", U"sitting"), 5u);
  EXPECT_EQ(fuzz_ratio("kitten", "sitting"), 62);  // 8/13 = 61.5…
  EXPECT_EQ(fuzz_ratio("abcdefgh", "abcdexyz"), 62);  // 62.5 → 62
  EXPECT_EQ(fuzz_ratio("abcdefgh", "abcdefgx"), 88);  // 87.5 → 88
  EXPECT_EQ(fuzz_ratio("naïve", "naive"), 80);        // code points, not bytes
}

TEST(LongBenchMetric, FirstLineRuleForFewShotDatasets) {
  const std::vector<std::string> trec = {"Location", "State"};
  const std::vector<std::string> answer = {"Location"};
  // trec: "\n\nState\nLocation" is cut to "State".
  EXPECT_EQ(longbench_sample_score("trec", "\n\nState\nLocation", answer, trec), 0.0);
  EXPECT_EQ(longbench_sample_score("trec", "\nLocation\nState", answer, trec), 1.0);
  // Not cut for other datasets.
  const std::vector<std::string> paris = {"Paris"};
  EXPECT_DOUBLE_EQ(longbench_sample_score("hotpotqa", "x\nParis", paris, {}), 2.0 / 3.0);
  EXPECT_EQ(longbench_sample_score("triviaqa", "x\nParis", paris, {}), 0.0);
}

TEST(LongBenchMetric, SampleScoreIsTheBestOverAnswers) {
  const std::vector<std::string> answers = {"London", "the city of Paris", "Paris"};
  EXPECT_EQ(score_sample(Metric::kQaF1, "Paris", answers), 1.0);
  EXPECT_EQ(score_sample(Metric::kQaF1, "Paris", {}), 0.0);
}

TEST(LongBenchMetric, DatasetMapAndRounding) {
  EXPECT_EQ(longbench_datasets().size(), 21u);
  EXPECT_EQ(longbench_metric("gov_report"), Metric::kRouge);
  EXPECT_EQ(longbench_metric("passage_retrieval_en"), Metric::kRetrieval);
  EXPECT_EQ(longbench_metric("repobench-p"), Metric::kCodeSim);
  EXPECT_EQ(longbench_metric("lsht"), Metric::kClassification);
  EXPECT_THROW(longbench_metric("hotpot"), Error);
  EXPECT_EQ(metric_from_name(metric_name(Metric::kRougeZh)), Metric::kRougeZh);
  EXPECT_THROW(metric_from_name("bleu"), Error);
  const std::vector<double> samples = {1, 1, 0};
  EXPECT_EQ(longbench_dataset_score(samples), 66.67);
  EXPECT_EQ(python_round(0.125, 2), 0.12);  // exact tie: to even
  EXPECT_EQ(python_round(0.375, 2), 0.38);
  EXPECT_EQ(python_round(2.675, 2), 2.67);  // 2.675 is 2.67499999… in binary
  const std::vector<double> datasets = {50, 60, 70.01};
  EXPECT_EQ(benchmark_average(datasets), 60.0);
}

TEST(LongBenchMetric, ChineseMetricsScoreByCharacter) {
  // The documented departure from jieba (zh_words.h): one word per character, ASCII
  // letter and digit runs whole.
  EXPECT_EQ(zh_words("GPT-4模型 ok"),
            (std::vector<std::string>{"GPT", "-", "4", "模", "型", " ", "ok"}));
  EXPECT_EQ(normalize_zh_answer("ＡＢ，c d！"), "ａｂcd");
  EXPECT_DOUBLE_EQ(qa_f1_zh("北京大学", "北京"), 2.0 / 3.0);
  EXPECT_EQ(qa_f1_zh("，。", "北京"), 0.0);
  EXPECT_EQ(rouge_l_zh("北京大学", "北京"), rouge_f(0.5, 1));
  EXPECT_EQ(longbench_metric("multifieldqa_zh"), Metric::kQaF1Zh);
}

TEST(LongBenchMetric, InvalidUtf8IsAnError) {
  const std::vector<std::string> answers = {"a"};
  EXPECT_THROW(score_sample(Metric::kQaF1, "\xff", answers), Error);
}

}  // namespace
}  // namespace deferkv::eval
