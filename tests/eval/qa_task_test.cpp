// RULER's QA tasks read SQuAD / HotpotQA files the way qa.py does; a missing file is an
// error naming it.
#include <gtest/gtest.h>

#include "deferkv/error.h"
#include "eval/eval_test_util.h"
#include "eval/tasks/qa_datasets.h"
#include "tensor/gguf_test_util.h"

namespace deferkv::eval {
namespace {

using eval_test::count_of;

TEST(QaDatasets, SquadKeepsAnswerableQuestionsWithTheirArticle) {
  gguf_test::TempDir dir;
  const QaDataset squad = read_squad(eval_test::write_squad(dir.file("squad.json")));
  ASSERT_EQ(squad.docs.size(), 3u);  // sorted: "Rollo …", "The Moon …", "The Normans …"
  EXPECT_EQ(squad.docs[0].rfind("Rollo", 0), 0u);
  EXPECT_EQ(squad.docs[2].rfind("The Normans", 0), 0u);
  ASSERT_EQ(squad.items.size(), 3u);  // the unanswerable one is skipped
  EXPECT_EQ(squad.items[0].question, "In what country is Normandy located?");
  EXPECT_EQ(squad.items[0].answers, std::vector<std::string>{"France"});
  EXPECT_EQ(squad.items[0].gold_docs, std::vector<int64_t>{2});
  EXPECT_EQ(squad.items[0].same_article_docs, std::vector<int64_t>{0});
  EXPECT_EQ(squad.items[1].answers, (std::vector<std::string>{"Rollo", "Rollo"}));
  EXPECT_TRUE(squad.items[2].same_article_docs.empty());
}

TEST(QaDatasets, HotpotDocumentsAreTitleNewlineSentences) {
  gguf_test::TempDir dir;
  const QaDataset hotpot = read_hotpotqa(eval_test::write_hotpotqa(dir.file("hotpot.json")));
  ASSERT_EQ(hotpot.docs.size(), 4u);  // Thames appears twice, kept once
  EXPECT_EQ(hotpot.docs[2], "Seine\nThe Seine is a river in northern France.");
  ASSERT_EQ(hotpot.items.size(), 2u);
  EXPECT_EQ(hotpot.items[0].answers, std::vector<std::string>{"Paris"});
  EXPECT_EQ(hotpot.items[0].gold_docs.size(), 3u);
}

TEST(QaTask, GoldDocumentsAreAmongNumberedDistractors) {
  gguf_test::TempDir dir;
  TaskOptions options;
  options.squad_path = eval_test::write_squad(dir.file("squad.json"));
  const TaskGenerator generator(test::llama_spm(), options);
  const TaskSample s = generator.ruler("qa_1", 1024, 1);
  EXPECT_EQ(s.references, (std::vector<std::string>{"Rollo", "Rollo"}));
  EXPECT_NE(s.prompt.find(":\nRollo was the first ruler of Normandy in the tenth century."), std::string::npos);
  EXPECT_NE(s.prompt.find("Document 1:\n"), std::string::npos);
  EXPECT_GT(count_of(s.prompt, "Document "), 10u);  // a 3-document set is repeated to fill 1024 tokens
  EXPECT_TRUE(s.prompt.ends_with("\n\nQuestion: Who was the first ruler of Normandy? Answer:"));
  EXPECT_THROW(generator.ruler("qa_1", 1024, 3), Error);  // only 3 answerable questions
}

TEST(QaTask, MissingOrUnnamedFileIsAClearError) {
  TaskOptions options;
  options.squad_path = "/nonexistent/dev-v2.0.json";
  try {
    TaskGenerator(test::llama_spm(), options).ruler("qa_1", 4096, 0);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot read the SQuAD file '/nonexistent/dev-v2.0.json'"),
              std::string::npos) << e.what();
  }
  try {
    TaskGenerator(test::llama_spm(), TaskOptions{}).ruler("qa_2", 4096, 0);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("give its path with --hotpotqa"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace deferkv::eval
