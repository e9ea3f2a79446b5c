// `deferkv make-data`: training samples are the evaluation's own samples (same prompt ids
// as TaskGenerator gives for the seed), each answer continues its prompt and ends the
// sequence, the file does not depend on the thread count, and the word split keeps the
// training keys and the held-out keys apart.
#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "deferkv/eval_tasks.h"
#include "deferkv/tokenizer.h"
#include "support/read_file.h"
#include "tensor/gguf_test_util.h"
#include "tools/cli_runner.h"

namespace deferkv {
namespace {

const std::string kVocab = std::string(DEFERKV_TEST_DATA) + "/vocab/ggml-vocab-llama-spm.gguf";

std::vector<nlohmann::json> rows_of(const std::string& path) {
  std::vector<nlohmann::json> rows;
  std::istringstream lines(testing::read_file(path));
  for (std::string line; std::getline(lines, line);) rows.push_back(nlohmann::json::parse(line));
  return rows;
}

std::string make_data(const gguf_test::TempDir& dir, const std::string& name, const std::string& options) {
  const std::string path = dir.file(name);
  const auto result = testing::run_cli("make-data -m '" + kVocab + "' " + options + " -o '" + path + "' 2>&1");
  EXPECT_EQ(result.status, 0) << result.output;
  return path;
}

TEST(MakeDataCommand, SamplesAreTheEvaluationsWithTheirAnswers) {
  gguf_test::TempDir dir;
  const std::string path = make_data(dir, "d.jsonl", "--tasks niah_single_1,vt --lengths 1024 --samples 2 --seed 7 -t 2");
  const auto rows = rows_of(path);
  ASSERT_EQ(rows.size(), 4u);

  const auto tokenizer = Tokenizer::from_path(kVocab);
  eval::TaskOptions options;
  options.seed = 7;
  options.prompt.chat = false;
  const eval::TaskGenerator generator(*tokenizer, options);
  for (const auto& row : rows) {
    const eval::TaskSample sample =
        generator.ruler(row["task"].get<std::string>(), 1024, row["index"].get<int64_t>());
    EXPECT_EQ(row["tokens"].get<std::vector<int32_t>>(), sample.tokens);
    EXPECT_EQ(row["references"].get<std::vector<std::string>>(), sample.references);
    std::vector<int32_t> answer = row["answer_tokens"].get<std::vector<int32_t>>();
    ASSERT_FALSE(answer.empty());
    EXPECT_EQ(answer.back(), tokenizer->eos_id());
    answer.pop_back();
    // The answer text holds every reference, in order, and ends with a period.
    const std::string text = tokenizer->decode(answer);
    size_t at = 0;
    for (const std::string& reference : sample.references) {
      at = text.find(reference, at);
      EXPECT_NE(at, std::string::npos) << reference << " in '" << text << "'";
    }
    EXPECT_EQ(text.back(), '.');
  }
  // niah's prompt ends in "... is": the answer is the joint encoding's continuation.
  const auto niah = rows[0];
  std::vector<int32_t> joint = niah["tokens"].get<std::vector<int32_t>>();
  for (int32_t id : niah["answer_tokens"]) joint.push_back(id);
  joint.pop_back();
  const std::string prompt = tokenizer->decode(niah["tokens"].get<std::vector<int32_t>>());
  EXPECT_EQ(tokenizer->decode(joint), prompt + " " + niah["references"][0].get<std::string>() + ".");
}

// Multi-value needles are shuffled by the run's seed; the answer lists the values in the
// order the prompt gives them, which a model can learn, whatever the shuffle.
TEST(MakeDataCommand, AnswersListTheValuesInThePromptsOrder) {
  gguf_test::TempDir dir;
  const auto tokenizer = Tokenizer::from_path(kVocab);
  bool some_reordered = false;
  for (const std::string seed : {"3", "4", "5"}) {
    const auto rows = rows_of(make_data(dir, "mv" + seed + ".jsonl",
                                        "--tasks niah_multivalue --lengths 600 --samples 2 --seed " + seed));
    for (const auto& row : rows) {
      const std::string prompt = tokenizer->decode(row["tokens"].get<std::vector<int32_t>>());
      std::vector<int32_t> answer = row["answer_tokens"].get<std::vector<int32_t>>();
      answer.pop_back();
      const std::string text = tokenizer->decode(answer);
      std::vector<std::pair<size_t, size_t>> at;  // (in the prompt, in the answer) per value
      for (const std::string& value : row["references"].get<std::vector<std::string>>()) {
        at.emplace_back(prompt.find(value), text.find(value));
        ASSERT_NE(at.back().first, std::string::npos) << value;
        ASSERT_NE(at.back().second, std::string::npos) << value << " in '" << text << "'";
      }
      ASSERT_EQ(at.size(), 4u);
      const bool generator_order_is_answer_order = std::is_sorted(
          at.begin(), at.end(), [](const auto& a, const auto& b) { return a.second < b.second; });
      some_reordered |= !generator_order_is_answer_order;
      std::sort(at.begin(), at.end());
      for (size_t i = 1; i < at.size(); ++i) EXPECT_LT(at[i - 1].second, at[i].second) << text;
    }
  }
  EXPECT_TRUE(some_reordered) << "every seed kept the generator's order: the test shows nothing";
}

TEST(MakeDataCommand, TheFileDoesNotDependOnTheThreads) {
  gguf_test::TempDir dir;
  const std::string options = "--tasks niah_single_1,niah_multivalue --lengths 700,900 --samples 3 --seed 3";
  const std::string one = make_data(dir, "one.jsonl", options + " -t 1");
  const std::string two = make_data(dir, "two.jsonl", options + " -t 2");
  EXPECT_EQ(testing::read_file(one), testing::read_file(two));
  EXPECT_EQ(rows_of(one).size(), 12u);
}

// The needle keys are adjective-noun pairs; with a split, each key is made of words from
// that split's half of the word lists (even or odd lines), and the halves differ.
TEST(MakeDataCommand, WordSplitsKeepTrainingAndHeldOutKeysApart) {
  gguf_test::TempDir dir;
  const std::string options = "--tasks niah_single_1 --lengths 600 --samples 40 --seed 5 -t 2";
  auto half_of = [](const std::string& file, int parity) {
    std::ifstream list(eval::TaskOptions::default_data_dir() + "/ruler/wonderwords/" + file);
    std::set<std::string> words;
    int line_number = 0;
    for (std::string line; std::getline(list, line); ++line_number) {
      if (line_number % 2 == parity) words.insert(line);
    }
    return words;
  };
  const auto tokenizer = Tokenizer::from_path(kVocab);
  auto keys_of = [&](const std::string& path) {
    // "... special magic number for <adjective>-<noun> mentioned ..." ends each prompt.
    std::vector<std::string> keys;
    for (const auto& row : rows_of(path)) {
      const std::string text = tokenizer->decode(row["tokens"].get<std::vector<int32_t>>());
      const std::string marker = "special magic number for ";
      const size_t start = text.rfind(marker) + marker.size();
      keys.push_back(text.substr(start, text.find(' ', start) - start));
    }
    return keys;
  };
  // Whether some '-' splits the key into an adjective and a noun of the half (words may
  // hold '-' themselves).
  auto made_of = [](const std::string& key, const std::set<std::string>& adjectives, const std::set<std::string>& nouns) {
    for (size_t dash = key.find('-'); dash != std::string::npos; dash = key.find('-', dash + 1)) {
      if (adjectives.contains(key.substr(0, dash)) && nouns.contains(key.substr(dash + 1))) return true;
    }
    return false;
  };
  for (int parity : {0, 1}) {
    const std::string split = parity == 0 ? "train" : "heldout";
    const auto keys = keys_of(make_data(dir, split + ".jsonl", options + " --word-split " + split));
    const auto adjectives = half_of("adjectivelist.txt", parity), nouns = half_of("nounlist.txt", parity);
    const auto other_adjectives = half_of("adjectivelist.txt", 1 - parity);
    const auto other_nouns = half_of("nounlist.txt", 1 - parity);
    int only_in_this_half = 0;
    for (const std::string& key : keys) {
      EXPECT_TRUE(made_of(key, adjectives, nouns)) << split << ": " << key;
      only_in_this_half += !made_of(key, other_adjectives, other_nouns);
    }
    EXPECT_GE(only_in_this_half, 38) << split;  // words listed twice may fall in both halves
  }
}

TEST(MakeDataCommand, BadOptionsAreNamed) {
  gguf_test::TempDir dir;
  auto error_of = [&](const std::string& options) {
    return testing::run_cli("make-data -m '" + kVocab + "' " + options + " -o '" + dir.file("x.jsonl") + "' 2>&1");
  };
  auto unknown = error_of("--tasks niah_single_9");
  EXPECT_EQ(unknown.status, 1);
  EXPECT_NE(unknown.output.find("unknown RULER task 'niah_single_9'"), std::string::npos) << unknown.output;
  auto split = error_of("--word-split half");
  EXPECT_NE(split.output.find("unknown word split 'half'"), std::string::npos) << split.output;
  auto short_vt = error_of("--tasks vt --lengths 300 --samples 1");
  EXPECT_NE(short_vt.output.find("vt at 300 tokens"), std::string::npos) << short_vt.output;
  EXPECT_FALSE(std::filesystem::exists(dir.file("x.jsonl")));
}

}  // namespace
}  // namespace deferkv
