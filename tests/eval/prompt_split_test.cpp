// Where each task's prompt is split for question-agnostic compression (TaskSample::
// context_tokens): the context ends where the template's context field ends, and the rest
// (the template's text after it, the chat turn's end, the assistant's opening, the answer
// prefix) is the question. Each expectation is the task's template text, written out here.
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "deferkv/eval_longbench.h"
#include "deferkv/tokenizer.h"
#include "eval/eval_test_util.h"
#include "tensor/gguf_test_util.h"

namespace deferkv::eval {
namespace {

struct Parts {
  std::string context, question;
};

// The two parts' text (decode() drops the space SentencePiece puts before a part's first
// word). The question's ids decode to the prompt's end.
Parts parts_of(const TaskSample& s, const Tokenizer& tokenizer) {
  EXPECT_GT(s.context_tokens, 1);
  EXPECT_LT(s.context_tokens, static_cast<int64_t>(s.tokens.size()));
  const auto& ids = s.tokens;
  const auto start = ids[0] == tokenizer.bos_id() ? 1 : 0;
  Parts p{tokenizer.decode({ids.begin() + start, ids.begin() + s.context_tokens}),
          tokenizer.decode({ids.begin() + s.context_tokens, ids.end()})};
  EXPECT_TRUE(s.prompt.ends_with(p.question)) << p.question;
  return p;
}

class SplitTask : public ::testing::TestWithParam<std::pair<std::string, std::string>> {};

// The question part starts with the template's text after {context} and holds nothing of
// the haystack; the context part ends with the haystack.
TEST_P(SplitTask, TheQuestionIsWhatFollowsTheContext) {
  const auto& [task, question_start] = GetParam();
  gguf_test::TempDir dir;
  TaskOptions options;
  options.squad_path = eval_test::write_squad(dir.file("squad.json"));
  options.hotpotqa_path = eval_test::write_hotpotqa(dir.file("hotpot.json"));
  const Tokenizer& tokenizer = test::llama_spm();
  const TaskSample s = TaskGenerator(tokenizer, options).ruler(task, 1024, 0);
  const Parts p = parts_of(s, tokenizer);
  EXPECT_EQ(p.question.rfind(question_start, 0), 0u) << p.question;
  EXPECT_LT(p.question.size(), 400u) << p.question;
  EXPECT_LT(p.question.size(), s.prompt.size() / 4);
}

INSTANTIATE_TEST_SUITE_P(
    Ruler, SplitTask,
    ::testing::Values(std::pair{"niah_single_1", "\nWhat is the special magic number for "},
                      std::pair{"niah_multikey_2", "\nWhat is the special magic number for "},
                      std::pair{"niah_multiquery", "\nWhat are all the special magic numbers for "},
                      std::pair{"vt", "\nQuestion: Find all variables that are assigned the value "},
                      std::pair{"cwe", "\nQuestion: What are the 10 most common words in the above list?"},
                      std::pair{"fwe", "\nQuestion: Do not provide any explanation."},
                      std::pair{"qa_1", "\n\nAnswer the question based on the given documents."}));

TEST(PromptSplit, NiahQuestionIsTheFillInQuestionAfterTheBook) {
  const TaskSample s = TaskGenerator(test::llama_spm(), TaskOptions{}).niah(1000, 50);
  const Parts p = parts_of(s, test::llama_spm());
  EXPECT_EQ(p.question, "</book>.\n Based on the content of the book, Question: The best thing to do in San Francisco is: \nAnswer:");
  EXPECT_EQ(p.context.rfind("This is a very long story book: <book>", 0), 0u);
}

// With a chat format the split is inside the user's turn: its opening goes with the
// context; the question, the turn's end and the assistant's opening with the question.
TEST(PromptSplit, AChatFormatSplitsInsideTheUserTurn) {
  const Tokenizer& qwen = test::qwen2();
  const TaskSample s = TaskGenerator(qwen, TaskOptions{}).ruler("niah_single_1", 1024, 0);
  const Parts p = parts_of(s, qwen);
  EXPECT_EQ(p.context.rfind("<|im_start|>user\nA special magic number", 0), 0u) << p.context.substr(0, 80);
  // Qwen2's pre-tokenizer makes ".\n" one token: the haystack's last period goes with the question.
  EXPECT_EQ(p.question.rfind(".\nWhat is the special magic number for ", 0), 0u) << p.question;
  EXPECT_NE(p.question.find(" mentioned in the provided text?<|im_end|>\n<|im_start|>assistant\n The special magic number for "),
            std::string::npos)
      << p.question;
}

// LongBench: the template's text after {context} (here the repeated instruction, the
// question and "Answer:") in llama3's user turn, which trims the content's ends.
TEST(PromptSplit, LongBenchQuestionIsTheTemplateAfterTheContext) {
  gguf_test::TempDir dir;
  std::ofstream(dir.file("hotpotqa.jsonl"))
      << nlohmann::json{{"input", "Which word?"}, {"context", "word1 word2 word3 word4."}, {"answers", {"word1"}},
                        {"length", 4},           {"dataset", "hotpotqa"},                 {"language", "en"},
                        {"all_classes", nullptr}, {"_id", "x"}}.dump()
      << "\n";
  LongBenchOptions options;
  options.data_dir = dir.path().string();
  options.datasets = {"hotpotqa"};
  options.prompt = {true, "llama3"};
  const LongBenchSet set(test::llama_spm(), 4096, options);
  const Parts p = parts_of(set.sample("hotpotqa", 0), test::llama_spm());
  EXPECT_TRUE(p.context.ends_with("word1 word2 word3 word4.")) << p.context;
  EXPECT_EQ(p.question.rfind("\n\nAnswer the question based on the given passages.", 0), 0u) << p.question;
  EXPECT_NE(p.question.find("Question: Which word?\nAnswer:<|eot_id|>"), std::string::npos) << p.question;
}

}  // namespace
}  // namespace deferkv::eval
