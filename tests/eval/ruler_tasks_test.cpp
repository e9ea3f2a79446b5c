// RULER's generators over the Llama-2 vocabulary: lengths hit the target, answers are in
// the prompt, samples depend only on (seed, task, length, index), the task templates are
// RULER's, and what each task is about (needles, chains, word counts) really holds.
#include <algorithm>
#include <map>
#include <regex>
#include <sstream>

#include <gtest/gtest.h>

#include "deferkv/error.h"
#include "deferkv/eval_metrics.h"
#include "eval/eval_test_util.h"
#include "tensor/gguf_test_util.h"

namespace deferkv::eval {
namespace {

using eval_test::count_of;

const TaskGenerator& llama_generator() {
  static TaskGenerator generator(test::llama_spm(), TaskOptions{});
  return generator;
}

class EveryTask : public ::testing::TestWithParam<std::string> {};

// Prompt plus generation within 1% below the target; every reference in the prompt.
TEST_P(EveryTask, FitsTheLengthAndHoldsItsAnswers) {
  gguf_test::TempDir dir;
  TaskOptions options;
  options.squad_path = eval_test::write_squad(dir.file("squad.json"));
  options.hotpotqa_path = eval_test::write_hotpotqa(dir.file("hotpot.json"));
  const TaskGenerator generator(test::llama_spm(), options);
  // uuid needle lines are ~60 tokens: 1% needs 8K tokens for them.
  const int64_t length = GetParam() == "niah_multikey_3" ? 8192 : 4096;
  const TaskSample s = generator.ruler(GetParam(), length, 1);
  const auto total = static_cast<int64_t>(s.tokens.size()) + s.max_new_tokens;
  EXPECT_LE(total, length);
  EXPECT_GE(total, length - length / 100) << "prompt " << s.tokens.size();
  EXPECT_EQ(s.tokens, test::llama_spm().encode(s.prompt, true, false));
  EXPECT_EQ(s.max_new_tokens, ruler_tokens_to_generate(GetParam()));
  ASSERT_FALSE(s.references.empty());
  for (const std::string& answer : s.references) EXPECT_NE(s.prompt.find(answer), std::string::npos) << answer;
  // A model that repeats the answers scores 100 with RULER's metric.
  std::string perfect;
  for (const std::string& answer : s.references) perfect += answer + " ";
  EXPECT_EQ(ruler_sample_score(GetParam(), perfect, s.references), 1.0);
}

INSTANTIATE_TEST_SUITE_P(Ruler, EveryTask,
                         ::testing::Values("niah_single_1", "niah_single_2", "niah_single_3", "niah_multikey_1",
                                           "niah_multikey_2", "niah_multikey_3", "niah_multivalue",
                                           "niah_multiquery", "vt", "cwe", "fwe", "qa_1", "qa_2"));

TEST(RulerTasks, DeterministicPerSeedTaskLengthAndIndex) {
  const TaskSample a = llama_generator().ruler("niah_multikey_1", 2048, 0);
  const TaskGenerator again(test::llama_spm(), TaskOptions{});
  EXPECT_EQ(again.ruler("niah_multikey_1", 2048, 0).prompt, a.prompt);
  EXPECT_NE(llama_generator().ruler("niah_multikey_1", 2048, 1).prompt, a.prompt);
  TaskOptions other_seed;
  other_seed.seed = 7;
  const TaskSample b = TaskGenerator(test::llama_spm(), other_seed).ruler("niah_multikey_1", 2048, 0);
  EXPECT_NE(b.prompt, a.prompt);
  EXPECT_NE(b.references, a.references);
}

TEST(RulerTasks, SingleNeedleTemplateIsRewrittenInTheSingular) {
  const TaskSample s = llama_generator().ruler("niah_single_1", 1024, 0);
  ASSERT_EQ(s.references.size(), 1u);
  const std::regex value("[0-9]{7}");
  EXPECT_TRUE(std::regex_match(s.references[0], value));
  EXPECT_EQ(s.prompt.rfind("A special magic number is hidden within the following text. Make sure to memorize it. "
                           "I will quiz you about the number afterwards.\n", 0), 0u);
  const size_t needle = s.prompt.find("One of the special magic numbers for ");
  ASSERT_NE(needle, std::string::npos);
  const std::string key = s.prompt.substr(needle + 37, s.prompt.find(" is: ", needle) - needle - 37);
  EXPECT_NE(s.prompt.find("One of the special magic numbers for " + key + " is: " + s.references[0] + ".\n"),
            std::string::npos);
  const std::string question = "\nWhat is the special magic number for " + key +
                               " mentioned in the provided text? The special magic number for " + key +
                               " mentioned in the provided text is";
  EXPECT_TRUE(s.prompt.ends_with(question)) << s.prompt.substr(s.prompt.size() - 200);
  // The noise haystack: one filler paragraph per line.
  EXPECT_GT(count_of(s.prompt, "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again.\n"), 10u);
}

TEST(RulerTasks, MultiQueryAsksForFourKeysAndMultiValueHidesFourValues) {
  const TaskSample q = llama_generator().ruler("niah_multiquery", 2048, 0);
  EXPECT_EQ(q.references.size(), 4u);
  EXPECT_NE(q.prompt.find("Some special magic numbers are hidden"), std::string::npos);
  EXPECT_NE(q.prompt.find(", and "), std::string::npos);  // "k1, k2, k3, and k4"
  const TaskSample v = llama_generator().ruler("niah_multivalue", 2048, 0);
  ASSERT_EQ(v.references.size(), 4u);
  EXPECT_TRUE(v.prompt.ends_with("mentioned in the provided text are"));
  // Four needles for the same key.
  const size_t first = v.prompt.find("One of the special magic numbers for ");
  const std::string key = v.prompt.substr(first + 37, v.prompt.find(" is: ", first) - first - 37);
  EXPECT_EQ(count_of(v.prompt, "One of the special magic numbers for " + key + " is: "), 4u);
}

TEST(RulerTasks, NeedleHaystackIsMadeOfDistractorNeedles) {
  const TaskSample s = llama_generator().ruler("niah_multikey_3", 2048, 0);
  const std::regex uuid("[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}");
  ASSERT_EQ(s.references.size(), 1u);
  EXPECT_TRUE(std::regex_match(s.references[0], uuid)) << s.references[0];
  EXPECT_GT(count_of(s.prompt, "One of the special magic uuids for "), 10u);
  EXPECT_EQ(count_of(s.prompt, s.references[0]), 1u);
}

TEST(RulerTasks, VariableTrackingHidesAChainAndShowsAWorkedExample) {
  const TaskSample s = llama_generator().ruler("vt", 2048, 0);
  ASSERT_EQ(s.references.size(), 5u);
  const std::string& v = s.references[0];
  const size_t assignment = s.prompt.rfind("VAR " + v + " = ");
  ASSERT_NE(assignment, std::string::npos);
  const std::string value = s.prompt.substr(assignment + 7 + v.size(), 5);
  for (size_t j = 1; j < 5; ++j) {
    EXPECT_NE(s.prompt.find("\nVAR " + s.references[j] + " = VAR " + s.references[j - 1] + " \n"), std::string::npos);
  }
  EXPECT_TRUE(s.prompt.ends_with("5 variables are assigned the value " + value + ", they are: "));
  // The example: the same task, answered, before the question.
  EXPECT_EQ(count_of(s.prompt, "Memorize and track the chain(s) of variable assignment"), 2u);
  const size_t example_end = s.prompt.find("\n\nMemorize and track", 10);
  ASSERT_NE(example_end, std::string::npos);
  const std::regex answered("they are:  [A-Z]{3} [A-Z]{3} [A-Z]{3} [A-Z]{3} [A-Z]{3}$");
  EXPECT_TRUE(std::regex_search(s.prompt.substr(0, example_end), answered));
}

TEST(RulerTasks, CommonWordsRepeatTheAnswersMostOften) {
  const TaskSample s = llama_generator().ruler("cwe", 4096, 0);
  ASSERT_EQ(s.references.size(), 10u);
  const std::string list = s.prompt.substr(s.prompt.rfind("Below is a numbered list"));
  // "1. w 2. w …": the words are what lies between the numbers (some words hold a space).
  const std::string numbered = list.substr(list.find('\n') + 1, list.find("\nQuestion:") - list.find('\n') - 1);
  const std::regex number("(^| )[0-9]+\\. ");
  std::map<std::string, int> counts;
  for (std::sregex_token_iterator it(numbered.begin(), numbered.end(), number, -1), end; it != end; ++it) {
    if (it->length() > 0) ++counts[it->str()];
  }
  for (const std::string& w : s.references) EXPECT_EQ(counts[w], 30) << w;
  int rare = 0;
  for (const auto& [word, n] : counts) rare += n == 3;
  EXPECT_EQ(rare + 10, static_cast<int>(counts.size()));
}

TEST(RulerTasks, FrequentWordsAreRanksTwoToFourOfTheZipfText) {
  const TaskSample s = llama_generator().ruler("fwe", 4096, 0);
  ASSERT_EQ(s.references.size(), 3u);
  const size_t begin = s.prompt.find("coded words. ") + 13, end = s.prompt.find("\nQuestion:");
  std::map<std::string, int> counts;
  std::istringstream words(s.prompt.substr(begin, end - begin));
  for (std::string w; words >> w;) ++counts[w];
  std::vector<std::pair<int, std::string>> ranked;
  for (const auto& [w, n] : counts) ranked.emplace_back(n, w);
  std::sort(ranked.rbegin(), ranked.rend());
  EXPECT_EQ(ranked[0].second, "...");
  EXPECT_EQ((std::vector<std::string>{ranked[1].second, ranked[2].second, ranked[3].second}), s.references);
}

TEST(RulerTasks, UnknownTaskAndTooShortLengthAreErrorsNamingThem) {
  try {
    llama_generator().ruler("niah_single_9", 4096, 0);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown RULER task 'niah_single_9'"), std::string::npos);
  }
  try {
    llama_generator().ruler("niah_single_2", 200, 0);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("niah_single_2 at 200 tokens"), std::string::npos) << e.what();
  }
}

TEST(RulerTasks, ChatFormatWrapsTheTaskAndTheAnswerPrefixFollowsIt) {
  const Tokenizer& qwen = test::qwen2();
  ASSERT_FALSE(qwen.chat_template().empty());
  const TaskSample chat = TaskGenerator(qwen, TaskOptions{}).ruler("niah_single_1", 1024, 0);
  EXPECT_EQ(chat.prompt.rfind("<|im_start|>user\nA special magic number", 0), 0u) << chat.prompt.substr(0, 80);
  EXPECT_NE(chat.prompt.find("<|im_end|>\n<|im_start|>assistant\n The special magic number for "), std::string::npos);
  EXPECT_EQ(chat.tokens, qwen.encode(chat.prompt, true, true));
  TaskOptions plain;
  plain.prompt.chat = false;
  const TaskSample raw = TaskGenerator(qwen, plain).ruler("niah_single_1", 1024, 0);
  EXPECT_EQ(raw.prompt.rfind("A special magic number", 0), 0u);
  EXPECT_EQ(TaskGenerator(qwen, plain).chat_template_name(), "");
}

}  // namespace
}  // namespace deferkv::eval
