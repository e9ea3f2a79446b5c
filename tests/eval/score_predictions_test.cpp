// Scoring a predictions JSONL text: grouping, order, averages, and errors that name the
// line and the problem.
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "deferkv/error.h"
#include "deferkv/score_predictions.h"
#include "tensor/gguf_test_util.h"

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

// The message of the Error that scoring the file or folder at `path` throws ("" if none).
std::string score_error(const std::string& path) {
  try {
    score_predictions_path(path, std::nullopt);
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
  ASSERT_EQ(s.rows.at(0).groups.size(), 3u);
  EXPECT_EQ(s.rows.at(0).groups[0].name, "hotpotqa");
  EXPECT_EQ(s.rows.at(0).groups[0].samples, 2u);
  EXPECT_EQ(s.rows.at(0).groups[0].score, 50.0);
  EXPECT_EQ(s.rows.at(0).groups[1].name, "trec");
  EXPECT_EQ(s.rows.at(0).groups[1].score, 100.0);
  EXPECT_EQ(s.rows.at(0).groups[2].name, "passage_count");
  EXPECT_EQ(s.rows.at(0).groups[2].score, 50.0);
  EXPECT_EQ(s.rows.at(0).average, 66.67);
}

TEST(ScorePredictions, RulerTasks) {
  const std::string jsonl =
      R"({"task": "qa_1", "pred": "Rome", "outputs": ["Paris", "rome"]})"
      "\n"
      R"({"task": "niah_single_1", "pred": "It is 93961587.", "outputs": ["3961587", "1234567"]})";
  const PredictionScores s = score_predictions(jsonl, "pred.jsonl", std::nullopt);
  EXPECT_EQ(s.benchmark, Benchmark::kRuler);
  ASSERT_EQ(s.rows.at(0).groups.size(), 2u);
  EXPECT_EQ(s.rows.at(0).groups[0].name, "niah_single_1");
  EXPECT_EQ(s.rows.at(0).groups[0].score, 50.0);
  EXPECT_EQ(s.rows.at(0).groups[1].name, "qa_1");
  EXPECT_EQ(s.rows.at(0).groups[1].score, 100.0);
  EXPECT_EQ(s.rows.at(0).average, 75.0);
}

TEST(ScorePredictions, NiahCellsByLengthThenDepth) {
  const std::string needle = R"("needle": "sit in Dolores Park")";
  const std::string jsonl = R"({"pred": "sit in Dolores Park", "length": 2000, "depth": 50, )" + needle +
                            "}\n" + R"({"pred": "no", "length": 1000, "depth": 50, )" + needle + "}\n" +
                            R"({"pred": "Dolores Park", "length": 1000, "depth": 0, )" + needle + "}\n";
  const PredictionScores s = score_predictions(jsonl, "pred.jsonl", std::nullopt);
  EXPECT_EQ(s.benchmark, Benchmark::kNiah);
  ASSERT_EQ(s.rows.at(0).groups.size(), 3u);
  EXPECT_EQ(s.rows.at(0).groups[0].name, "length=1000,depth=0");
  EXPECT_EQ(s.rows.at(0).groups[0].score, 66.67);  // P = 1, R = 2/4: F = 2/3, on 0-100
  EXPECT_EQ(s.rows.at(0).groups[1].name, "length=1000,depth=50");
  EXPECT_EQ(s.rows.at(0).groups[1].score, 0.0);
  EXPECT_EQ(s.rows.at(0).groups[2].name, "length=2000,depth=50");
  EXPECT_EQ(s.rows.at(0).groups[2].score, 100.0);
  EXPECT_EQ(s.rows.at(0).average, 55.56);

  const PredictionScores all = score_predictions(R"({"pred": "Dolores Park", )" + needle + "}", "p", std::nullopt);
  ASSERT_EQ(all.rows.at(0).groups.size(), 1u);
  EXPECT_EQ(all.rows.at(0).groups[0].name, "all");
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

// A sweep's samples.jsonl names each line's method; pooling them would average a full
// cache with a compressed one (the file below pooled is 50 for niah_single_1).
TEST(ScorePredictions, LinesOfDifferentMethodsAreScoredApart) {
  const std::string hit = R"("task": "niah_single_1", "pred": "It is 1234567.", "outputs": ["1234567"])";
  const std::string miss = R"("task": "niah_single_1", "pred": "none", "outputs": ["1234567"])";
  const std::string jsonl = R"({"label": "full", )" + hit + "}\n" + R"({"label": "snapkv@64", )" + miss + "}\n" +
                            R"({"label": "full", )" + hit + "}\n" + R"({"label": "snapkv@64", )" + hit + "}\n";
  const PredictionScores s = score_predictions(jsonl, "samples.jsonl", std::nullopt);
  ASSERT_EQ(s.rows.size(), 2u);
  EXPECT_EQ(s.rows[0].label, "full");
  EXPECT_EQ(s.rows[0].groups.at(0).samples, 2u);
  EXPECT_EQ(s.rows[0].groups.at(0).score, 100.0);
  EXPECT_EQ(s.rows[1].label, "snapkv@64");
  EXPECT_EQ(s.rows[1].groups.at(0).score, 50.0);
  EXPECT_FALSE(s.rows[0].length.has_value());
}

// RULER lines of a sweep carry the target length: one row per length, as eval's tables.
TEST(ScorePredictions, SweepRulerRowsAreSplitByLength) {
  const std::string jsonl =
      R"({"label": "full", "length": 4096, "task": "vt", "pred": "X", "outputs": ["x"]})"
      "\n"
      R"({"label": "full", "length": 1024, "task": "vt", "pred": "Y", "outputs": ["x"]})"
      "\n";
  const PredictionScores s = score_predictions(jsonl, "samples.jsonl", std::nullopt);
  ASSERT_EQ(s.rows.size(), 2u);
  EXPECT_EQ(s.rows[0].length, 1024);
  EXPECT_EQ(s.rows[0].average, 0.0);
  EXPECT_EQ(s.rows[1].length, 4096);
  EXPECT_EQ(s.rows[1].average, 100.0);
}

void write(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

// RULER's pred/<task>.jsonl and LongBench's pred/<model>/<dataset>.jsonl name the task in
// the file name; their "length" is the sample's own size, not a row.
TEST(ScorePredictions, OfficialPredictionFoldersTakeTheTaskFromTheFileName) {
  gguf_test::TempDir ruler;
  write(ruler.file("niah_single_1.jsonl"),
        R"({"index": 0, "pred": "It is 1234567.", "outputs": ["1234567"], "length": 4011})"
        "\n"
        R"({"index": 1, "pred": "no", "outputs": ["7654321"], "length": 3990})"
        "\n");
  write(ruler.file("vt.jsonl"), R"({"index": 0, "pred": "X Y", "outputs": ["x", "z"], "length": 4001})");
  write(ruler.file("summary.csv"), "not, predictions\n");
  const PredictionScores r = score_predictions_path(ruler.file(""), std::nullopt);
  EXPECT_EQ(r.benchmark, Benchmark::kRuler);
  ASSERT_EQ(r.rows.size(), 1u);
  ASSERT_EQ(r.rows[0].groups.size(), 2u);
  EXPECT_EQ(r.rows[0].groups[0].name, "niah_single_1");
  EXPECT_EQ(r.rows[0].groups[0].score, 50.0);
  EXPECT_EQ(r.rows[0].groups[1].name, "vt");
  EXPECT_EQ(r.rows[0].groups[1].score, 50.0);

  const PredictionScores one = score_predictions_path(ruler.file("vt.jsonl"), std::nullopt);
  EXPECT_EQ(one.rows.at(0).groups.at(0).name, "vt");

  gguf_test::TempDir longbench;
  write(longbench.file("hotpotqa.jsonl"),
        R"({"pred": "Paris", "answers": ["Paris"], "all_classes": null, "length": 9151})");
  const PredictionScores l = score_predictions_path(longbench.file(""), std::nullopt);
  EXPECT_EQ(l.benchmark, Benchmark::kLongBench);
  EXPECT_EQ(l.rows.at(0).groups.at(0).name, "hotpotqa");
  EXPECT_EQ(l.rows.at(0).groups.at(0).score, 100.0);

  // --task names the task of a file whose name does not.
  write(longbench.file("pred.jsonl"), R"({"pred": "X Y", "outputs": ["x", "z"]})");
  const PredictionScores t = score_predictions_path(longbench.file("pred.jsonl"), std::nullopt, "vt");
  EXPECT_EQ(t.rows.at(0).groups.at(0).name, "vt");
  EXPECT_EQ(t.rows.at(0).groups.at(0).score, 50.0);
}

TEST(ScorePredictions, FolderErrorsNameTheFileAndTheProblem) {
  gguf_test::TempDir dir;
  const std::string empty = score_error(dir.file(""));
  EXPECT_EQ(empty, "'" + dir.file("") + "' holds no predictions (*.jsonl files)");
  write(dir.file("hotpotqa.jsonl"), R"({"pred": "Paris", "answers": ["Paris"]})");
  write(dir.file("vt.jsonl"), R"({"pred": "X", "outputs": ["x"]})");
  EXPECT_EQ(score_error(dir.file("")), dir.file("vt.jsonl") + ":1: a ruler line among longbench ones; score one benchmark at a time");
  write(dir.file("pred.jsonl"), R"({"pred": "X", "outputs": ["x"]})");
  EXPECT_EQ(score_error(dir.file("pred.jsonl")),
            dir.file("pred.jsonl") + ":1: cannot tell the benchmark: the line has none of the fields 'dataset' "
                                     "(LongBench), 'task' (RULER) or 'needle' (NIAH); give --benchmark");
}

TEST(ScorePredictions, BenchmarkNames) {
  EXPECT_EQ(benchmark_from_name("ruler"), Benchmark::kRuler);
  EXPECT_EQ(benchmark_name(Benchmark::kLongBench), "longbench");
  EXPECT_THROW(benchmark_from_name("mmlu"), Error);
  EXPECT_THROW(score_predictions_path("/no/such/predictions.jsonl", std::nullopt), Error);
}

}  // namespace
}  // namespace deferkv::eval
