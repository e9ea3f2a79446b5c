// The Python string operations the generators rely on, the sentence splitter and the
// generators' random numbers.
#include <set>

#include <gtest/gtest.h>

#include "deferkv/error.h"
#include "eval/tasks/rng.h"
#include "eval/tasks/sentence_split.h"
#include "eval/tasks/template_text.h"

namespace deferkv::eval {
namespace {

TEST(TemplateText, FillTemplateReplacesEveryFieldInOnePass) {
  EXPECT_EQ(fill_template("{a} and {b}, {a}!", {{"a", "x"}, {"b", "{a}"}}), "x and {a}, x!");
  EXPECT_THROW(fill_template("{missing}", {}), Error);
}

TEST(TemplateText, ReplaceAllIsPythonsStrReplace) {
  EXPECT_EQ(replace_all("What are all the magic numbers are", "are all", "is"), "What is the magic numbers are");
  EXPECT_EQ(replace_all("aaa", "aa", "b"), "ba");
}

TEST(TemplateText, SplitOnWhitespaceRunsIsReSubThenSplit) {
  // re.sub(r'\s+', ' ', "  a\n\tb\xa0c  ").split(' ') == ['', 'a', 'b', 'c', '']
  EXPECT_EQ(split_on_whitespace_runs("  a\n\tb\xc2\xa0" "c  "), (std::vector<std::string>{"", "a", "b", "c", ""}));
  EXPECT_EQ(split_on_whitespace_runs("one"), std::vector<std::string>{"one"});
  EXPECT_EQ(strip("\n \xe2\x80\x83x y\xc2\xa0 "), "x y");
}

TEST(SentenceSplit, SplitsAfterSentenceEndsButNotAbbreviationsOrInitials) {
  const std::vector<std::string> s =
      split_sentences("Mr. Smith met J. Doe in the U.S. today. Why? Because (he said so.) It rained, e.g. twice!");
  EXPECT_EQ(s, (std::vector<std::string>{"Mr. Smith met J. Doe in the U.S. today.", "Why?", "Because (he said so.)",
                                         "It rained, e.g. twice!"}));
}

TEST(Rng, SameSeedSameDrawsAndSamplesAreDistinct) {
  Rng a(7), b(7), c(8);
  std::vector<int64_t> da, db, dc;
  for (int i = 0; i < 20; ++i) {
    da.push_back(a.uniform(0, 1000));
    db.push_back(b.uniform(0, 1000));
    dc.push_back(c.uniform(0, 1000));
  }
  EXPECT_EQ(da, db);
  EXPECT_NE(da, dc);
  for (int64_t k : {3, 60, 100}) {  // few of many, and most of the range
    const std::vector<int64_t> s = Rng(1).sample(100, k);
    EXPECT_EQ(std::set<int64_t>(s.begin(), s.end()).size(), static_cast<size_t>(k));
    for (int64_t v : s) EXPECT_TRUE(v >= 0 && v < 100);
  }
  EXPECT_THROW(Rng(1).sample(3, 4), Error);
  EXPECT_NE(sample_seed(42, "vt", 4096, 0), sample_seed(42, "vt", 4096, 1));
  EXPECT_NE(sample_seed(42, "vt", 4096, 0), sample_seed(42, "cwe", 4096, 0));
  EXPECT_EQ(sample_seed(42, "vt", 4096, 3), sample_seed(42, "vt", 4096, 3));
}

}  // namespace
}  // namespace deferkv::eval
