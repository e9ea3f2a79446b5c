// Needle-in-a-Haystack samples over the Llama-2 vocabulary: the needle at its depth, just
// after a sentence end, the prompt at its length, the essays the gkamradt set.
#include <gtest/gtest.h>

#include "deferkv/eval_metrics.h"
#include "deferkv/tokenizer.h"
#include "eval/eval_test_util.h"
#include "eval/tasks/task_data.h"

namespace deferkv::eval {
namespace {

const TaskGenerator& llama_generator() {
  static TaskGenerator generator(test::llama_spm(), TaskOptions{});
  return generator;
}

constexpr std::string_view kNeedleText =
    "The best thing to do in San Francisco is eat a sandwich and sit in Dolores Park on a sunny day.";

TEST(NiahTask, NeedleSitsAtTheRequestedDepthAfterASentenceEnd) {
  for (double depth : niah_default_depths()) {
    const TaskSample s = llama_generator().niah(2000, depth);
    const auto prompt_tokens = static_cast<int64_t>(s.tokens.size());
    EXPECT_LE(prompt_tokens, 2000);
    EXPECT_GE(prompt_tokens, 1980) << "depth " << depth;
    const size_t open = s.prompt.find("<book> ") + 7, close = s.prompt.rfind(" </book>");
    const std::string context = s.prompt.substr(open, close - open);
    const size_t needle = context.find(kNeedleText);
    ASSERT_NE(needle, std::string::npos) << "depth " << depth;
    if (depth == 0) EXPECT_EQ(context.rfind("\n" + std::string(kNeedleText) + "\n", 0), 0u);
    if (depth == 100) EXPECT_TRUE(context.ends_with(std::string(kNeedleText) + "\n"));
    if (depth == 0 || depth == 100) continue;
    // The needle's token position within the haystack, against the depth asked for: a little
    // before it, moved back to the end of the sentence it fell in.
    const auto before = static_cast<double>(test::llama_spm().encode(context.substr(0, needle), false, false).size());
    const auto haystack = static_cast<double>(
        test::llama_spm().encode(context.substr(0, needle - 2) + context.substr(needle + kNeedleText.size()), false, false)
            .size());
    const double at = 100 * before / haystack;
    EXPECT_LE(at, depth + 0.5);
    EXPECT_GE(at, depth - 3) << "depth " << depth;
    // Right after a sentence end (the needle's own leading space and newline between).
    EXPECT_EQ(context.substr(needle - 3, 3), ". \n") << context.substr(needle - 40, 60);
  }
}

TEST(NiahTask, PromptIsTheStoryBookWithTheFillInQuestion) {
  const TaskSample s = llama_generator().niah(1000, 50);
  EXPECT_EQ(s.prompt.rfind("This is a very long story book: <book> ", 0), 0u);
  EXPECT_TRUE(s.prompt.ends_with(
      " </book>.\n Based on the content of the book, Question: The best thing to do in San Francisco is: \nAnswer:"));
  EXPECT_EQ(s.references, std::vector<std::string>{std::string(niah_needle())});
  EXPECT_EQ(s.max_new_tokens, 30);
  EXPECT_TRUE(s.stop_at_newline);
  EXPECT_EQ(s.depth_percent, 50);
  EXPECT_EQ(s.tokens, test::llama_spm().encode(s.prompt, true, false));
  // Deterministic: NIAH has no randomness at all.
  EXPECT_EQ(TaskGenerator(test::llama_spm(), TaskOptions{}).niah(1000, 50).prompt, s.prompt);
  // A response that is the needle sentence scores full marks; its second half, 12 of 21 words, 10 * 24/33.
  EXPECT_DOUBLE_EQ(niah_score(std::string(kNeedleText), s.references[0]), 10.0);
  EXPECT_NEAR(niah_score("eat a sandwich and sit in Dolores Park on a sunny day.", s.references[0]), 240.0 / 33, 1e-9);
}

TEST(NiahTask, DefaultDepthsAreRoundedLinspace) {
  EXPECT_EQ(niah_default_depths(), (std::vector<double>{0, 11, 22, 33, 44, 56, 67, 78, 89, 100}));
}

TEST(NiahTask, HaystackIsTheFortyNineGkamradtEssaysInFileNameOrder) {
  const TaskData data(TaskOptions::default_data_dir(), "", "");
  const std::string_view essays = data.niah_essays();
  EXPECT_EQ(essays.size(), 644051u);
  EXPECT_EQ(essays.substr(0, 17), "July 2010What har");                 // addiction.txt opens the set
  EXPECT_TRUE(essays.ends_with("Taggar for reading drafts of this."));  // worked.txt closes it
  EXPECT_EQ(data.essay_text().substr(essays.size(), 25), "**Want to start a startup");  // RULER's html essays follow
}

}  // namespace
}  // namespace deferkv::eval
