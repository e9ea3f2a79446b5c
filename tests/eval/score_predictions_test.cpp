// Scoring a predictions JSONL text: grouping, order, averages, and errors that name the
// line and the problem.
#include <string>

#include <gtest/gtest.h>

#include "deferkv/error.h"
#include "deferkv/score_predictions.h"

namespace deferkv::eval {
namespace {

// The message of the Error that scoring `jsonl` throws ("" if none).
std::string error_of(const std::string& jsonl, std::optional<Benchmark> benchmark = std::nullopt) {
  try {
    score_predictions(jsonl, "pred.jsonl", benchmark);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(ScorePredictions, LongBenchDatasetsInEvalPyOrderWithTheirAverage) {
  const std::string jsonl =
      R"({"dataset": "trec", "pred": "\nCity\nState", "answers": ["City"], "all_classes": ["City", "State"]})"
      "\n"
      R"({"dataset": "hotpotqa", "pred": "Paris", "answers": ["Paris"], "all_classes": null})"
      "\n\n"
      R"({"dataset": "hotpotqa", "pred": "London", "answers": ["Paris", "Rome"]})"
      "\n"
      R"({"dataset": "passage_count", "pred": "3 or 4", "answers": ["3"], "all_classes": []})"
      "\n";
  const PredictionScores s = score_predictions(jsonl, "pred.jsonl", std::nullopt);
  EXPECT_EQ(s.benchmark, Benchmark::kLongBench);
  ASSERT_EQ(s.groups.size(), 3u);
  EXPECT_EQ(s.groups[0].name, "hotpotqa");
  EXPECT_EQ(s.groups[0].samples, 2u);
  EXPECT_EQ(s.groups[0].score, 50.0);
  EXPECT_EQ(s.groups[1].name, "trec");
  EXPECT_EQ(s.groups[1].score, 100.0);
  EXPECT_EQ(s.groups[2].name, "passage_count");
  EXPECT_EQ(s.groups[2].score, 50.0);
  EXPECT_EQ(s.average, 66.67);
}

TEST(ScorePredictions, RulerTasks) {
  const std::string jsonl =
      R"({"task": "qa_1", "pred": "Rome", "outputs": ["Paris", "rome"]})"
      "\n"
      R"({"task": "niah_single_1", "pred": "It is 93961587.", "outputs": ["3961587", "1234567"]})";
  const PredictionScores s = score_predictions(jsonl, "pred.jsonl", std::nullopt);
  EXPECT_EQ(s.benchmark, Benchmark::kRuler);
  ASSERT_EQ(s.groups.size(), 2u);
  EXPECT_EQ(s.groups[0].name, "niah_single_1");
  EXPECT_EQ(s.groups[0].score, 50.0);
  EXPECT_EQ(s.groups[1].name, "qa_1");
  EXPECT_EQ(s.groups[1].score, 100.0);
  EXPECT_EQ(s.average, 75.0);
}

TEST(ScorePredictions, NiahCellsByLengthThenDepth) {
  const std::string needle = R"("needle": "sit in Dolores Park")";
  const std::string jsonl = R"({"pred": "sit in Dolores Park", "length": 2000, "depth": 50, )" + needle +
                            "}\n" + R"({"pred": "no", "length": 1000, "depth": 50, )" + needle + "}\n" +
                            R"({"pred": "Dolores Park", "length": 1000, "depth": 0, )" + needle + "}\n";
  const PredictionScores s = score_predictions(jsonl, "pred.jsonl", std::nullopt);
  EXPECT_EQ(s.benchmark, Benchmark::kNiah);
  ASSERT_EQ(s.groups.size(), 3u);
  EXPECT_EQ(s.groups[0].name, "length=1000,depth=0");
  EXPECT_EQ(s.groups[0].score, 6.67);  // P = 1, R = 2/4
  EXPECT_EQ(s.groups[1].name, "length=1000,depth=50");
  EXPECT_EQ(s.groups[1].score, 0.0);
  EXPECT_EQ(s.groups[2].name, "length=2000,depth=50");
  EXPECT_EQ(s.groups[2].score, 10.0);
  EXPECT_EQ(s.average, 5.56);

  const PredictionScores all = score_predictions(R"({"pred": "Dolores Park", )" + needle + "}", "p", std::nullopt);
  ASSERT_EQ(all.groups.size(), 1u);
  EXPECT_EQ(all.groups[0].name, "all");
}

TEST(ScorePredictions, ErrorsNameTheLineAndTheProblem) {
  const std::string good = R"({"dataset": "hotpotqa", "pred": "a", "answers": ["a"]})";
  EXPECT_EQ(error_of(good + "\n{\"dataset\": "), "pred.jsonl:2: invalid JSON ([json.exception.parse_error.101] parse error at line 1, column 13: syntax error while parsing value - unexpected end of input; expected '[', '{', or a literal)");
  EXPECT_EQ(error_of(good + "\n\n[1, 2]"), "pred.jsonl:3: expected a JSON object, got array");
  EXPECT_EQ(error_of(R"({"dataset": "hotpotqa", "pred": "a"})"), "pred.jsonl:1: missing field 'answers'");
  EXPECT_EQ(error_of(R"({"dataset": "hotpotqa", "pred": 3, "answers": []})"),
            "pred.jsonl:1: field 'pred' must be a string, not number");
  EXPECT_EQ(error_of(R"({"dataset": "hotpotqa", "pred": "a", "answers": "a"})"),
            "pred.jsonl:1: field 'answers' must be a list of strings, not string");
  EXPECT_EQ(error_of(R"({"dataset": "hotpotqa", "pred": "a", "answers": [1]})"),
            "pred.jsonl:1: field 'answers' must be a list of strings; it holds a number");
  EXPECT_NE(error_of(R"({"dataset": "hotpot", "pred": "a", "answers": []})")
                .find("pred.jsonl:1: unknown LongBench dataset 'hotpot' (known: narrativeqa, qasper,"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"task": "niah", "pred": "a", "outputs": ["a"]})").find("pred.jsonl:1: unknown RULER task 'niah'"),
            std::string::npos);
  EXPECT_EQ(error_of(R"({"task": "vt", "pred": "a", "outputs": []})"),
            "pred.jsonl:1: string_match_all needs at least one reference");
  EXPECT_EQ(error_of(R"({"dataset": "trec", "pred": "a", "answers": ["a"], "all_classes": null})"),
            "pred.jsonl:1: classification needs the list of class names (all_classes)");
  EXPECT_EQ(error_of(R"({"dataset": "passage_retrieval_en", "pred": "1", "answers": ["1"]})"),
            "pred.jsonl:1: retrieval answer '1' names no 'Paragraph N'");
  EXPECT_EQ(error_of(R"({"pred": "a"})"),
            "pred.jsonl:1: cannot tell the benchmark: the line has none of the fields 'dataset' "
            "(LongBench), 'task' (RULER) or 'needle' (NIAH); give --benchmark");
  EXPECT_EQ(error_of(R"({"pred": "a", "needle": "a", "length": 10})"),
            "pred.jsonl:1: give both 'length' and 'depth', or neither");
  EXPECT_EQ(error_of(good, Benchmark::kRuler), "pred.jsonl:1: missing field 'task'");
  EXPECT_EQ(error_of("\n  \n"), "pred.jsonl: no predictions in it");
  // A number past double's range (found by fuzz/fuzz_score_predictions.cpp: nlohmann's
  // out_of_range escaped as another exception type).
  EXPECT_EQ(error_of(R"({"pred": "a", "needle": "a", "length": 1E400, "depth": 0})").substr(0, 48),
            "pred.jsonl:1: invalid JSON ([json.exception.out_");
  EXPECT_EQ(error_of("{\"dataset\": \"hotpotqa\", \"pred\": \"\xff\", \"answers\": []}").substr(0, 32),
            "pred.jsonl:1: invalid JSON ([jso");
}

TEST(ScorePredictions, BenchmarkNames) {
  EXPECT_EQ(benchmark_from_name("ruler"), Benchmark::kRuler);
  EXPECT_EQ(benchmark_name(Benchmark::kLongBench), "longbench");
  EXPECT_THROW(benchmark_from_name("mmlu"), Error);
  EXPECT_THROW(score_predictions_file("/no/such/predictions.jsonl", std::nullopt), Error);
}

}  // namespace
}  // namespace deferkv::eval
