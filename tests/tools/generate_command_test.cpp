// `deferkv generate`, run as the built CLI on the embedded model.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include <nlohmann/json.hpp>

#include "tools/cli_runner.h"
#include "tensor/gguf_test_util.h"

namespace deferkv {
namespace {

using testing::run_cli;

nlohmann::json first_reference_case() {
  std::ifstream in(std::string(DEFERKV_TEST_DATA) + "/reference/stories260K_greedy.json");
  return nlohmann::json::parse(in)["cases"][0];
}

TEST(GenerateCommand, GreedyStreamsTheReferenceContinuation) {
  const auto c = first_reference_case();
  const auto result = run_cli("generate --temp 0 -n 48 -t 2 -p '" + c["prompt"].get<std::string>() + "' 2>/dev/null");
  ASSERT_EQ(result.status, 0);
  EXPECT_EQ(result.output, c["generated_text"].get<std::string>() + "\n");
}

TEST(GenerateCommand, SameSeedSameTextAtTemperature) {
  const auto a = run_cli("generate --temp 0.9 --seed 11 -n 40 -p 'The little dog' 2>/dev/null");
  const auto b = run_cli("generate --temp 0.9 --seed 11 -n 40 -p 'The little dog' 2>/dev/null");
  ASSERT_EQ(a.status, 0);
  EXPECT_EQ(a.output, b.output);
  EXPECT_GT(a.output.size(), 40u);
}

// The continuation keeps its leading space, so prompt + output reads as one text:
// llama.cpp continues "The little dog" greedily with " was a little girl" on this model.
TEST(GenerateCommand, TheContinuationKeepsItsLeadingSpace) {
  const auto result = run_cli("generate --temp 0 -n 6 -p 'The little dog' 2>/dev/null");
  ASSERT_EQ(result.status, 0);
  EXPECT_EQ(result.output, " was a little girl\n");
}

// A full context stops generation: 64 - 5 prompt tokens are generated, and the stop says why.
TEST(GenerateCommand, AFullContextStopsWithItsReason) {
  const auto result = run_cli("generate --temp 0 -n 500 -c 64 -p 'Once upon a time' 2>&1 >/dev/null");
  ASSERT_EQ(result.status, 0) << result.output;
  EXPECT_NE(result.output.find("generated: 59 tokens"), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("stop: context_full"), std::string::npos) << result.output;
}

TEST(GenerateCommand, DumpLogitsWritesTheLastPromptLogits) {
  gguf_test::TempDir dir;  // fresh, so no earlier run's file can stand in for this one's
  const std::string path = dir.file("logits.bin");
  // llama.cpp's logits with an f32 KV cache, so ours with one too.
  const auto result = run_cli("generate --temp 0 -n 1 -p 'Once upon a time' -ctk f32 -ctv f32 --dump-logits '" + path +
                              "' 2>/dev/null");
  ASSERT_EQ(result.status, 0);
  std::ifstream dumped(path, std::ios::binary);
  std::ifstream reference(std::string(DEFERKV_TEST_DATA) + "/reference/stories260K_0.llamacpp_kvf32.logits",
                          std::ios::binary);
  std::vector<float> ours(512), theirs(512);
  dumped.read(reinterpret_cast<char*>(ours.data()), 512 * 4);
  reference.read(reinterpret_cast<char*>(theirs.data()), 512 * 4);
  ASSERT_TRUE(dumped && reference);
  EXPECT_EQ(dumped.peek(), EOF);  // exactly n_vocab floats
  for (int i = 0; i < 512; ++i) EXPECT_NEAR(ours[i], theirs[i], 1e-4) << i;
}

TEST(GenerateCommand, BadInputGivesAClearErrorAndExitCodeOne) {
  auto r = run_cli("generate -m /no/such/model.gguf -p hi 2>&1");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.output.find("error: cannot open '/no/such/model.gguf'"), std::string::npos) << r.output;

  r = run_cli("generate -c 4 -p 'Once upon a time there was' 2>&1");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.output.find("do not fit in the context of 4"), std::string::npos) << r.output;

  r = run_cli("generate 2>&1");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.output.find("give the prompt with -p or -f"), std::string::npos) << r.output;

  r = run_cli("generate -p hi --top-p 0 2>&1");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.output.find("top-p must be in (0, 1]"), std::string::npos) << r.output;
}

// --question gives the question apart from the prompt (the context). Question-aware, the
// ids and so the text are those of the prompt with the question appended; question-agnostic
// compresses the context alone first. Without a question, agnostic mode is an error naming the fix.
TEST(GenerateCommand, AQuestionIsReadAfterTheContextInEitherMode) {
  const std::string context = "Once upon a time there was a little girl named Lily. She loved to play outside.";
  const std::string common = "generate --temp 0 -n 12 --press snapkv:window=4 --kv-budget 8 ";
  const auto whole = run_cli(common + "-p '" + context + " What did Lily love?' 2>/dev/null");
  const auto aware = run_cli(common + "-p '" + context + "' --question ' What did Lily love?' 2>&1");
  const auto agnostic = run_cli(common + "-p '" + context + "' --question ' What did Lily love?' --question-agnostic 2>&1");
  ASSERT_EQ(whole.status, 0);
  ASSERT_EQ(aware.status, 0) << aware.output;
  ASSERT_EQ(agnostic.status, 0) << agnostic.output;
  EXPECT_EQ(aware.output.rfind(whole.output.substr(0, whole.output.size() - 1), 0), 0u) << aware.output;
  EXPECT_NE(aware.output.find("question-aware, 26 context + 10 question tokens"), std::string::npos) << aware.output;
  EXPECT_NE(agnostic.output.find("question-agnostic, 26 context + 10 question tokens"), std::string::npos)
      << agnostic.output;
  // Compressed before the question, the context keeps other entries: another answer.
  EXPECT_NE(agnostic.output.substr(0, agnostic.output.find("\nprompt:")), aware.output.substr(0, aware.output.find("\nprompt:")));

  const auto missing = run_cli("generate -p 'Once upon a time' --question-agnostic 2>&1");
  EXPECT_EQ(missing.status, 1);
  EXPECT_NE(missing.output.find("give the question with --question TEXT or --question-file FILE"), std::string::npos)
      << missing.output;
}

// --save-context compresses the prompt alone and saves it; --context answers the prompt after
// it: the same text as the question-agnostic run that compresses and answers at once, and a
// --press other than the context's, or other cache types, is refused naming both.
TEST(GenerateCommand, ASavedContextAnswersAsQuestionAgnostic) {
  const std::string context = "Once upon a time there was a little girl named Lily. She loved to play outside.";
  const std::string press = "--press snapkv:window=4 --kv-budget 8 ";
  const std::string path = ::testing::TempDir() + "generate_context.dkvctx";
  const auto saved = run_cli("generate " + press + "-p '" + context + "' --save-context '" + path + "' 2>&1");
  ASSERT_EQ(saved.status, 0) << saved.output;
  EXPECT_NE(saved.output.find("context: 26 tokens compressed by snapkv:window=4"), std::string::npos) << saved.output;
  const auto agnostic = run_cli("generate --temp 0 -n 12 " + press + "-p '" + context +
                                "' --question ' What did Lily love?' --question-agnostic 2>/dev/null");
  const auto answered = run_cli("generate --temp 0 -n 12 --context '" + path + "' -p ' What did Lily love?' 2>/dev/null");
  ASSERT_EQ(answered.status, 0);
  EXPECT_EQ(answered.output, agnostic.output);
  const auto other_press = run_cli("generate --context '" + path + "' --press knorm --kv-budget 8 -p ' x' 2>&1");
  EXPECT_EQ(other_press.status, 1);
  EXPECT_NE(other_press.output.find("not 'knorm:"), std::string::npos) << other_press.output;
  const auto other_types = run_cli("generate --context '" + path + "' -ctk f32 -ctv f32 -p ' x' 2>&1");
  EXPECT_EQ(other_types.status, 1);
  EXPECT_NE(other_types.output.find("as f16/f16 (keys/values), not f32/f32"), std::string::npos) << other_types.output;
  std::remove(path.c_str());
}

// A deferkv context is deferred: --context resumes the press, which evicts at the answer's
// step d, so the answer is the question-agnostic run's; a --kv-budget other than the
// context's is refused naming both.
TEST(GenerateCommand, ADeferredContextAnswersAsQuestionAgnostic) {
  const std::string context = "Once upon a time there was a little girl named Lily. She loved to play outside.";
  const std::string press = "--press deferkv:window=4,d=2,pool=2x --kv-budget 6 ";
  const std::string path = ::testing::TempDir() + "generate_deferred.dkvctx";
  const auto saved = run_cli("generate " + press + "-p '" + context + "' --save-context '" + path + "' 2>&1");
  ASSERT_EQ(saved.status, 0) << saved.output;
  EXPECT_NE(saved.output.find("f16/f16, deferred), "), std::string::npos) << saved.output;
  // The same question ids both ways: --question's are split from the context's text joined
  // to it (" What" after "outside." is one piece), --context's prompt is encoded alone (its
  // leading word takes SentencePiece's space), so the latter is given without the space.
  for (const std::string question : {"What did Lily love?", "Who was Lily?"}) {
    const auto agnostic = run_cli("generate --temp 0 -n 12 " + press + "-p '" + context + "' --question ' " + question +
                                  "' --question-agnostic 2>/dev/null");
    const auto answered = run_cli("generate --temp 0 -n 12 --context '" + path + "' -p '" + question + "' 2>/dev/null");
    ASSERT_EQ(answered.status, 0);
    EXPECT_EQ(answered.output, agnostic.output) << question;
  }
  const auto other_budget =
      run_cli("generate --context '" + path + "' --press deferkv:window=4,d=2,pool=2x --kv-budget 7 -p ' x' 2>&1");
  EXPECT_EQ(other_budget.status, 1);
  EXPECT_NE(other_budget.output.find("made with budget 6 per head, not 7 per head"), std::string::npos)
      << other_budget.output;
  std::remove(path.c_str());
}

TEST(GenerateCommand, MakeModelThenBenchRunsOnIt) {
  gguf_test::TempDir dir;
  const std::string path = dir.file("bench-model.gguf");
  ASSERT_EQ(run_cli("make-model --arch qwen2 --type q8_0 --n-embd 64 --n-ff 128 --n-layer 1 -o '" + path +
                    "' >/dev/null").status, 0);
  const auto r = run_cli("bench -m '" + path + "' -p 16 -n 4 -d 0,8 -t 1 -r 2 --format json");
  ASSERT_EQ(r.status, 0);
  const auto json = nlohmann::json::parse(r.output);
  ASSERT_EQ(json.size(), 4u);  // pp16, tg4 at depths 0 and 8
  EXPECT_EQ(json[3]["test"], "tg4 @ d8");
  EXPECT_EQ(json[3]["samples_ts"].size(), 2u);
  EXPECT_GT(json[0]["avg_ts"].get<double>(), 0.0);
}

}  // namespace
}  // namespace deferkv
