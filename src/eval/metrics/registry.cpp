// The public scoring API: metric names, the benchmark → metric maps, dispatch and the
// official aggregation rules.
#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "base/utf8.h"
#include "deferkv/error.h"
#include "deferkv/eval_metrics.h"
#include "eval/metrics/classification.h"
#include "eval/metrics/code_sim.h"
#include "eval/metrics/number_match.h"
#include "eval/metrics/python_text.h"
#include "eval/metrics/qa_f1.h"
#include "eval/metrics/rouge_1.h"
#include "eval/metrics/rouge_l.h"
#include "eval/metrics/string_match.h"

namespace deferkv::eval {
namespace {

constexpr std::pair<Metric, std::string_view> kMetricNames[] = {
    {Metric::kQaF1, "qa_f1"},
    {Metric::kQaF1Zh, "qa_f1_zh"},
    {Metric::kRouge, "rouge"},
    {Metric::kRougeZh, "rouge_zh"},
    {Metric::kClassification, "classification"},
    {Metric::kRetrieval, "retrieval"},
    {Metric::kRetrievalZh, "retrieval_zh"},
    {Metric::kCount, "count"},
    {Metric::kCodeSim, "code_sim"},
    {Metric::kStringMatchAll, "string_match_all"},
    {Metric::kStringMatchPart, "string_match_part"},
    {Metric::kNiahRouge1, "niah_rouge1"},
};

// LongBench/eval.py's dataset2metric, in its order.
constexpr std::pair<std::string_view, Metric> kLongBenchMetrics[] = {
    {"narrativeqa", Metric::kQaF1},
    {"qasper", Metric::kQaF1},
    {"multifieldqa_en", Metric::kQaF1},
    {"multifieldqa_zh", Metric::kQaF1Zh},
    {"hotpotqa", Metric::kQaF1},
    {"2wikimqa", Metric::kQaF1},
    {"musique", Metric::kQaF1},
    {"dureader", Metric::kRougeZh},
    {"gov_report", Metric::kRouge},
    {"qmsum", Metric::kRouge},
    {"multi_news", Metric::kRouge},
    {"vcsum", Metric::kRougeZh},
    {"trec", Metric::kClassification},
    {"triviaqa", Metric::kQaF1},
    {"samsum", Metric::kRouge},
    {"lsht", Metric::kClassification},
    {"passage_retrieval_en", Metric::kRetrieval},
    {"passage_count", Metric::kCount},
    {"passage_retrieval_zh", Metric::kRetrievalZh},
    {"lcc", Metric::kCodeSim},
    {"repobench-p", Metric::kCodeSim},
};

// RULER's synthetic.yaml tasks and the metric of their task family (constants.py).
constexpr std::pair<std::string_view, Metric> kRulerMetrics[] = {
    {"niah_single_1", Metric::kStringMatchAll},   {"niah_single_2", Metric::kStringMatchAll},
    {"niah_single_3", Metric::kStringMatchAll},   {"niah_multikey_1", Metric::kStringMatchAll},
    {"niah_multikey_2", Metric::kStringMatchAll}, {"niah_multikey_3", Metric::kStringMatchAll},
    {"niah_multivalue", Metric::kStringMatchAll}, {"niah_multiquery", Metric::kStringMatchAll},
    {"vt", Metric::kStringMatchAll},              {"cwe", Metric::kStringMatchAll},
    {"fwe", Metric::kStringMatchAll},             {"qa_1", Metric::kStringMatchPart},
    {"qa_2", Metric::kStringMatchPart},
};

template <size_t N>
constexpr auto keys_of(const std::pair<std::string_view, Metric> (&table)[N]) {
  std::array<std::string_view, N> keys{};
  for (size_t i = 0; i < N; ++i) keys[i] = table[i].first;
  return keys;
}

constexpr auto kLongBenchDatasets = keys_of(kLongBenchMetrics);
constexpr auto kRulerTasks = keys_of(kRulerMetrics);

template <size_t N>
Metric lookup(const std::pair<std::string_view, Metric> (&table)[N], std::string_view key,
              std::string_view what) {
  for (const auto& [name, metric] : table) {
    if (name == key) return metric;
  }
  fail("unknown {} '{}' (known: {})", what, key, fmt::join(keys_of(table), ", "));
}

void check_utf8(std::string_view text, std::string_view what) {
  if (!is_valid_utf8(text)) fail("{} is not valid UTF-8", what);
}

// The score of one reference for the metrics that take the best over the references.
double score_one(Metric metric, std::string_view prediction, std::string_view reference,
                 std::span<const std::string> all_classes) {
  switch (metric) {
    case Metric::kQaF1: return qa_f1(prediction, reference);
    case Metric::kQaF1Zh: return qa_f1_zh(prediction, reference);
    case Metric::kRouge: return rouge_l(prediction, reference);
    case Metric::kRougeZh: return rouge_l_zh(prediction, reference);
    case Metric::kClassification:
      return classification(prediction, reference, {all_classes.begin(), all_classes.end()});
    case Metric::kRetrieval: return retrieval(prediction, reference);
    case Metric::kRetrievalZh: return retrieval_zh(prediction, reference);
    case Metric::kCount: return count_match(prediction, reference);
    case Metric::kCodeSim: return code_sim(prediction, reference);
    case Metric::kNiahRouge1: return 10 * rouge_1(prediction, reference);
    case Metric::kStringMatchAll:
    case Metric::kStringMatchPart: break;
  }
  fail("metric {} does not score references one by one", metric_name(metric));
}

}  // namespace

std::string_view metric_name(Metric metric) {
  for (const auto& [m, name] : kMetricNames) {
    if (m == metric) return name;
  }
  fail("unknown metric {}", static_cast<int>(metric));
}

Metric metric_from_name(std::string_view name) {
  for (const auto& [metric, n] : kMetricNames) {
    if (n == name) return metric;
  }
  std::vector<std::string_view> names;
  for (const auto& entry : kMetricNames) names.push_back(entry.second);
  fail("unknown metric '{}' (known: {})", name, fmt::join(names, ", "));
}

double score_sample(Metric metric, std::string_view prediction,
                    std::span<const std::string> references,
                    std::span<const std::string> all_classes) {
  check_utf8(prediction, "the prediction");
  for (const std::string& r : references) check_utf8(r, "a reference");
  for (const std::string& c : all_classes) check_utf8(c, "a class name");
  if (metric == Metric::kClassification && all_classes.empty()) {
    fail("classification needs the list of class names (all_classes)");
  }
  const std::vector<std::string> refs(references.begin(), references.end());
  if (metric == Metric::kStringMatchAll) return string_match_all(prediction, refs);
  if (metric == Metric::kStringMatchPart) return string_match_part(prediction, refs);
  // eval.py: score = 0., then the max over the answers.
  double best = 0.0;
  for (const std::string& reference : references) {
    best = std::max(best, score_one(metric, prediction, reference, all_classes));
  }
  return best;
}

std::span<const std::string_view> longbench_datasets() { return kLongBenchDatasets; }

Metric longbench_metric(std::string_view dataset) {
  return lookup(kLongBenchMetrics, dataset, "LongBench dataset");
}

double longbench_sample_score(std::string_view dataset, std::string_view prediction,
                              std::span<const std::string> answers,
                              std::span<const std::string> all_classes) {
  const Metric metric = longbench_metric(dataset);
  if (dataset == "trec" || dataset == "triviaqa" || dataset == "samsum" || dataset == "lsht") {
    prediction = split_on(lstrip_chars(prediction, "\n"), '\n').front();
  }
  return score_sample(metric, prediction, answers, all_classes);
}

double longbench_dataset_score(std::span<const double> sample_scores) {
  if (sample_scores.empty()) fail("a dataset score needs at least one sample");
  double total = 0.0;
  for (double s : sample_scores) total += s;
  return python_round(100 * total / static_cast<double>(sample_scores.size()), 2);
}

std::span<const std::string_view> ruler_tasks() { return kRulerTasks; }

Metric ruler_metric(std::string_view task) { return lookup(kRulerMetrics, task, "RULER task"); }

double ruler_sample_score(std::string_view task, std::string_view prediction,
                          std::span<const std::string> outputs) {
  const Metric metric = ruler_metric(task);
  check_utf8(prediction, "the prediction");
  return score_sample(metric, ruler_postprocess(prediction), outputs);
}

double ruler_task_score(std::span<const double> sample_scores) {
  if (sample_scores.empty()) fail("a task score needs at least one sample");
  double total = 0.0;
  for (double s : sample_scores) total += s;
  return python_round(total / static_cast<double>(sample_scores.size()) * 100, 2);
}

double niah_score(std::string_view response, std::string_view needle) {
  const std::string reference(needle);
  return score_sample(Metric::kNiahRouge1, response, std::span(&reference, 1));
}

double benchmark_average(std::span<const double> scores) {
  if (scores.empty()) fail("an average needs at least one score");
  double total = 0.0;
  for (double s : scores) total += s;
  return python_round(total / static_cast<double>(scores.size()), 2);
}

double python_round(double value, int digits) {
  // printf rounds the exact binary value correctly, ties to even, as Python's round().
  char buffer[512];
  std::snprintf(buffer, sizeof(buffer), "%.*f", digits, value);
  return std::strtod(buffer, nullptr);
}

}  // namespace deferkv::eval
