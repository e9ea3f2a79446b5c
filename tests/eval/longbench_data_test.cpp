// LongBench as pred.py feeds it: the official JSONL schema (files the test writes and a
// real excerpt), the config JSONs, middle truncation, the chat-format exemptions, the
// first-line rule of eval.py, and the prompts built from it all.
#include <filesystem>
#include <fstream>
#include <functional>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "deferkv/error.h"
#include "deferkv/eval_longbench.h"
#include "deferkv/eval_metrics.h"
#include "deferkv/tokenizer.h"
#include "eval/eval_test_util.h"
#include "support/error_of.h"
#include "tensor/gguf_test_util.h"
#include "tokenizer/tokenizer_test_util.h"

namespace deferkv::eval {
namespace {

using testing::error_of;

// Two rows in the official schema: trec with its classes, a QA row whose all_classes is null.
std::string write_rows(const std::string& path) {
  std::ofstream(path) << R"({"input": "What is a cat?", "context": "Question: Who? Type: Individual\n", "answers": ["Animal"], "length": 5, "dataset": "trec", "language": "en", "all_classes": ["Animal", "Individual"], "_id": "t1"})"
                      << "\n\n"
                      << R"({"input": "Q2", "context": "C2", "answers": ["a", "b"], "length": 1, "dataset": "qasper", "language": "en", "all_classes": null, "_id": "q2"})"
                      << "\n";
  return path;
}

TEST(LongBenchData, ReadsTheOfficialSchema) {
  gguf_test::TempDir dir;
  const std::vector<LongBenchRow> rows = read_longbench_file(write_rows(dir.file("trec.jsonl")));
  ASSERT_EQ(rows.size(), 2u);  // the blank line is skipped
  EXPECT_EQ(rows[0].input, "What is a cat?");
  EXPECT_EQ(rows[0].context, "Question: Who? Type: Individual\n");
  EXPECT_EQ(rows[0].answers, std::vector<std::string>{"Animal"});
  EXPECT_EQ(rows[0].all_classes, (std::vector<std::string>{"Animal", "Individual"}));
  EXPECT_EQ(rows[0].length, 5);
  EXPECT_EQ(rows[0].id, "t1");
  EXPECT_EQ(rows[1].answers, (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(rows[1].all_classes.empty());
  EXPECT_EQ(rows[1].dataset, "qasper");
  EXPECT_EQ(read_longbench_file(dir.file("trec.jsonl"), 1).size(), 1u);
}

TEST(LongBenchData, ReadsARealOfficialExcerpt) {
  const std::string path = std::string(DEFERKV_TEST_DATA) + "/eval/multifieldqa_zh_excerpt.jsonl";
  const std::vector<LongBenchRow> rows = read_longbench_file(path);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].dataset, "multifieldqa_zh");
  EXPECT_EQ(rows[0].language, "zh");
  EXPECT_EQ(rows[0].id, "e2ac2e89d5bbb92fa33c1cd2ee31eee105fba65d1e78dfd5");
  EXPECT_EQ(rows[0].answers, std::vector<std::string>{"这段文字主要是关于状元魔方K12产品手册的内容介绍。"});
  EXPECT_TRUE(rows[0].all_classes.empty());
  EXPECT_GT(rows[0].context.size(), 1000u);
}

TEST(LongBenchData, MissingFileAndBadRowsAreClearErrors) {
  gguf_test::TempDir dir;
  const std::string missing = dir.file("hotpotqa.jsonl");
  const std::string error = error_of([&] { read_longbench_file(missing); });
  EXPECT_NE(error.find("'" + missing + "' does not exist"), std::string::npos) << error;
  std::ofstream(dir.file("bad.jsonl")) << R"({"input": "q", "context": "c"})" << "\n";
  const std::string bad = error_of([&] { read_longbench_file(dir.file("bad.jsonl")); });
  EXPECT_NE(bad.find("bad.jsonl:1: no 'answers' field"), std::string::npos) << bad;
  // The set names the missing dataset file too.
  LongBenchOptions options;
  options.data_dir = dir.path().string();
  options.datasets = {"hotpotqa"};
  const std::string set_error = error_of([&] { const LongBenchSet set(test::llama_spm(), 4096, options); });
  EXPECT_NE(set_error.find(missing), std::string::npos) << set_error;
}

TEST(LongBenchData, MiddleTruncationKeepsTheFirstAndLastHalf) {
  const std::vector<int32_t> ids = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  EXPECT_EQ(middle_truncate(ids, 6), (std::vector<int32_t>{1, 2, 3, 8, 9, 10}));
  // int(7 / 2) = 3 from each end: an odd max_length keeps one id less, as pred.py does.
  EXPECT_EQ(middle_truncate(ids, 7), (std::vector<int32_t>{1, 2, 3, 8, 9, 10}));
  EXPECT_EQ(middle_truncate(ids, 10), ids);
  EXPECT_EQ(middle_truncate(ids, 64), ids);
}

TEST(LongBenchData, ChatFormatExemptionsArePredPys) {
  std::vector<std::string> plain;
  for (std::string_view d : longbench_datasets()) {
    if (!longbench_uses_chat(d)) plain.emplace_back(d);
  }
  EXPECT_EQ(plain, (std::vector<std::string>{"trec", "triviaqa", "samsum", "lsht", "lcc", "repobench-p"}));
  EXPECT_EQ(longbench_english_datasets().size(), 16u);
  for (std::string_view d : longbench_english_datasets()) EXPECT_NO_THROW(longbench_metric(d)) << d;
}

TEST(LongBenchData, FirstLineRuleOnlyForTheFewShotSets) {
  const std::vector<std::string> answers = {"Paris"};
  // triviaqa: "\n\nParis\nLondon" becomes "Paris" first.
  EXPECT_DOUBLE_EQ(longbench_sample_score("triviaqa", "\n\nParis\nLondon", answers, {}), 1.0);
  // narrativeqa (same qa_f1 metric) scores the whole text: P = 1/2, R = 1.
  EXPECT_NEAR(longbench_sample_score("narrativeqa", "\n\nParis\nLondon", answers, {}), 2.0 / 3.0, 1e-12);
  const std::vector<std::string> classes = {"Animal", "Food"};
  EXPECT_DOUBLE_EQ(longbench_sample_score("trec", "\nAnimal\nFood", std::vector<std::string>{"Animal"}, classes), 1.0);
}

TEST(LongBenchData, PromptsAreFilledOnceLikeStrFormat) {
  LongBenchRow row;
  row.context = "text with {input} inside";
  row.input = "Q?";
  EXPECT_EQ(fill_longbench_prompt("A {context} B {input} {{x}}", row), "A text with {input} inside B Q? {x}");
  EXPECT_NE(error_of([&] { fill_longbench_prompt("{other}", row); }).find("unknown field '{other}'"), std::string::npos);
}

TEST(LongBenchData, ConfigIsTheOfficialOne) {
  const LongBenchConfig config = LongBenchConfig::load(LongBenchConfig::default_dir());
  EXPECT_EQ(config.max_new_tokens("gov_report"), 512);
  EXPECT_EQ(config.max_new_tokens("hotpotqa"), 32);
  EXPECT_NE(config.prompt_template("narrativeqa").find("asconcisely"), std::string::npos);
  EXPECT_TRUE(config.prompt_template("passage_count").ends_with("The final answer is: "));
  EXPECT_NE(error_of([&] { config.max_new_tokens("nope"); }).find("dataset2maxlen.json"), std::string::npos);
}

TEST(LongBenchData, AFolderInPlaceOfAConfigFileIsAClearError) {
  // Found by fuzz/fuzz_press_spec.cpp on the CompressKV profile reader, which read JSON the
  // same way: a folder opens as a stream whose first read throws std::ios_base::failure.
  gguf_test::TempDir dir;
  std::filesystem::create_directory(dir.file("dataset2prompt.json"));
  std::ofstream(dir.file("dataset2maxlen.json")) << R"({"trec": 64})";
  const std::string error = error_of([&] { LongBenchConfig::load(dir.path().string()); });
  EXPECT_NE(error.find("cannot open '" + dir.file("dataset2prompt.json") + "'"), std::string::npos) << error;
  const std::string too_long = "/" + std::string(5000, 'x') + ".jsonl";  // filesystem_error otherwise
  EXPECT_NE(error_of([&] { read_longbench_file(too_long); }).find("does not exist"), std::string::npos);
}

// A context of `words` numbered words, so the kept halves can be told apart.
std::string numbered_words(int words) {
  std::string text;
  for (int i = 0; i < words; ++i) text += fmt::format("word{} ", i);
  return text;
}

TEST(LongBenchData, SamplesAreTruncatedInTheMiddleThenChatWrapped) {
  gguf_test::TempDir dir;
  for (const char* dataset : {"hotpotqa", "triviaqa"}) {
    std::ofstream(dir.file(std::string(dataset) + ".jsonl"))
        << nlohmann::json{{"input", "Which word?"}, {"context", numbered_words(400)}, {"answers", {"word1"}},
                          {"length", 400},         {"dataset", dataset},            {"language", "en"},
                          {"all_classes", nullptr}, {"_id", "x"}}.dump()
        << "\n";
  }
  LongBenchOptions options;
  options.data_dir = dir.path().string();
  options.datasets = {"hotpotqa", "triviaqa"};
  options.max_length = 300;
  options.prompt = {true, "llama3"};
  const LongBenchSet set(test::llama_spm(), 4096, options);
  EXPECT_EQ(set.chat_template_name(), "llama3");

  const TaskSample qa = set.sample("hotpotqa", 0);
  EXPECT_EQ(qa.task, "hotpotqa");
  EXPECT_EQ(qa.target_length, 300);
  EXPECT_EQ(qa.max_new_tokens, 32);
  EXPECT_EQ(qa.references, std::vector<std::string>{"word1"});
  EXPECT_FALSE(qa.stop_at_newline);
  // Chat-wrapped: the instruction starts the user turn, the question and "Answer:" (the
  // last half) end it; the middle of the context is gone.
  EXPECT_EQ(qa.prompt.rfind("<|start_header_id|>user<|end_header_id|>\n\nAnswer the question", 0), 0u) << qa.prompt;
  EXPECT_NE(qa.prompt.find("Question: Which word?\nAnswer:<|eot_id|>"), std::string::npos) << qa.prompt;
  EXPECT_NE(qa.prompt.find("word0 "), std::string::npos);
  EXPECT_EQ(qa.prompt.find("word200 "), std::string::npos);
  EXPECT_NE(qa.prompt.find("word399"), std::string::npos);

  // triviaqa: no chat format, the same truncation; its prompt re-tokenizes to about max_length.
  const TaskSample few_shot = set.sample("triviaqa", 0);
  EXPECT_EQ(few_shot.prompt.find("<|start_header_id|>"), std::string::npos);
  EXPECT_EQ(few_shot.prompt.rfind("Answer the question based on the given passage.", 0), 0u) << few_shot.prompt;
  EXPECT_NEAR(static_cast<double>(few_shot.tokens.size()), 300.0, 4.0);
  EXPECT_EQ(few_shot.tokens.front(), test::llama_spm().bos_id());
}

TEST(LongBenchData, SamsumStopsAtANewlineAndDefaultLengthLeavesRoomToGenerate) {
  gguf_test::TempDir dir;
  std::ofstream(dir.file("samsum.jsonl"))
      << R"({"input": "A: hi", "context": "Dialogue: B: yo\nSummary: B greets.\n", "answers": ["A greets."], "length": 4, "dataset": "samsum", "language": "en", "all_classes": null, "_id": "s"})"
      << "\n";
  LongBenchOptions options;
  options.data_dir = dir.path().string();
  options.datasets = {"samsum"};
  const LongBenchSet set(test::llama_spm(), 2048, options);
  EXPECT_EQ(set.max_length("samsum"), 2048 - 128);
  const TaskSample s = set.sample("samsum", 0);
  EXPECT_TRUE(s.stop_at_newline);
  EXPECT_EQ(s.max_new_tokens, 128);
  EXPECT_EQ(s.prompt.find("<|"), std::string::npos);  // llama-spm has no chat format of its own
}

}  // namespace
}  // namespace deferkv::eval
