// Scores recorded by running the reference Python scorers (LongBench metrics.py and
// eval.py with `rouge` 1.0.1 and fuzzywuzzy + python-Levenshtein, RULER's constants.py,
// Google's rouge_score with NLTK 3.8's PorterStemmer) on the same inputs; how they were
// made is in tests/data/eval/record_reference_vectors.py. Every value must match to the
// last bit: the port computes with the same operations in the same order.
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "deferkv/eval_metrics.h"
#include "eval/metrics/porter_stemmer.h"
#include "eval/metrics/rouge_1.h"

namespace deferkv::eval {
namespace {

using nlohmann::json;

const json& vectors() {
  static const json data = [] {
    std::ifstream in(std::string(DEFERKV_TEST_DATA) + "/eval/reference_vectors.json");
    return json::parse(in);
  }();
  return data;
}

std::vector<std::string> strings(const json& value) {
  return value.is_null() ? std::vector<std::string>{} : value.get<std::vector<std::string>>();
}

TEST(MetricReferenceVectors, LongBenchMetricsMatchMetricsPy) {
  const json& cases = vectors().at("metric_cases");
  ASSERT_GT(cases.size(), 300u);
  for (const json& c : cases) {
    const std::string pred = c.at("pred"), ref = c.at("ref");
    const std::vector<std::string> refs = {ref};
    const std::vector<std::string> classes = strings(c.value("all_classes", json()));
    const Metric metric = metric_from_name(c.at("metric").get<std::string>());
    EXPECT_EQ(score_sample(metric, pred, refs, classes), c.at("score").get<double>())
        << c.at("metric") << " pred=" << json(pred) << " ref=" << json(ref);
  }
}

TEST(MetricReferenceVectors, LongBenchDatasetScoresMatchEvalPy) {
  for (const json& c : vectors().at("dataset_cases")) {
    const std::string dataset = c.at("dataset");
    const std::vector<std::string> classes = strings(c.at("all_classes"));
    std::vector<double> samples;
    for (size_t i = 0; i < c.at("preds").size(); ++i) {
      samples.push_back(longbench_sample_score(dataset, c.at("preds")[i].get<std::string>(),
                                               strings(c.at("answers")[i]), classes));
    }
    EXPECT_EQ(longbench_dataset_score(samples), c.at("score").get<double>()) << dataset;
  }
}

TEST(MetricReferenceVectors, RulerScoresMatchConstantsPy) {
  for (const json& c : vectors().at("ruler_cases")) {
    // Any task of the metric's family: the task only picks the metric.
    const std::string task = c.at("metric") == "string_match_all" ? "niah_single_1" : "qa_1";
    std::vector<double> samples;
    for (size_t i = 0; i < c.at("preds").size(); ++i) {
      samples.push_back(ruler_sample_score(task, c.at("preds")[i].get<std::string>(), strings(c.at("refs")[i])));
    }
    EXPECT_EQ(ruler_task_score(samples), c.at("score").get<double>()) << c.at("preds").dump();
  }
}

TEST(MetricReferenceVectors, NiahRouge1MatchesRougeScore) {
  for (const json& c : vectors().at("niah_cases")) {
    const std::string pred = c.at("pred"), ref = c.at("ref");
    EXPECT_EQ(rouge_1(pred, ref), c.at("fmeasure").get<double>()) << json(pred);
    EXPECT_EQ(niah_score(pred, ref), 10 * c.at("fmeasure").get<double>());
  }
}

TEST(MetricReferenceVectors, PorterStemsMatchNltk) {
  const json& stems = vectors().at("porter_stems");
  ASSERT_GT(stems.size(), 1000u);
  for (const auto& [word, stem] : stems.items()) EXPECT_EQ(porter_stem(word), stem.get<std::string>()) << word;
}

}  // namespace
}  // namespace deferkv::eval
