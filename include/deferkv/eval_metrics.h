#pragma once
// The official scores of LongBench v1, RULER and Needle-in-a-Haystack, ported so that
// predictions from any engine get the numbers the reference Python scorers print
// (quirks included; see docs/evaluation.md and src/eval/metrics/).
//
// Text is UTF-8; invalid UTF-8 is an error. A sample score is in [0, 1] (NIAH: [0, 10]);
// dataset, task and NIAH cell scores are on the 0..100 scale, rounded as the official
// scripts do, and so is every score deferkv shows.
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace deferkv::eval {

enum class Metric {
  kQaF1,             // LongBench qa_f1_score
  kQaF1Zh,           // LongBench qa_f1_zh_score (character-level, see zh_words.h)
  kRouge,            // LongBench rouge_score: ROUGE-L F of the `rouge` 1.0.1 package
  kRougeZh,          // LongBench rouge_zh_score (character-level, see zh_words.h)
  kClassification,   // LongBench classification_score (needs all_classes)
  kRetrieval,        // LongBench retrieval_score
  kRetrievalZh,      // LongBench retrieval_zh_score
  kCount,            // LongBench count_score
  kCodeSim,          // LongBench code_sim_score
  kStringMatchAll,   // RULER: share of the references found
  kStringMatchPart,  // RULER: 1 if any reference is found
  kNiahRouge1,       // NIAH: rouge_score ROUGE-1 F (Porter stemming) × 10
};

// The metric's name as the reference code spells it ("qa_f1", "rouge_zh",
// "string_match_all", "niah_rouge1", …), and back; an unknown name is an error listing
// the known ones.
std::string_view metric_name(Metric metric);
Metric metric_from_name(std::string_view name);

// One prediction against its references. LongBench metrics and NIAH take the best score
// over the references; RULER's metrics look at all of them at once. `all_classes` is
// read by kClassification only (an error if it is empty there).
double score_sample(Metric metric, std::string_view prediction,
                    std::span<const std::string> references,
                    std::span<const std::string> all_classes = {});

// LongBench (THUDM/LongBench LongBench/eval.py): the 21 datasets in eval.py's order,
// the metric of each (unknown dataset: an error listing the known ones), and a sample's
// score with eval.py's rule for trec, triviaqa, samsum and lsht (the prediction is cut to
// `pred.lstrip('\n').split('\n')[0]` first).
std::span<const std::string_view> longbench_datasets();
Metric longbench_metric(std::string_view dataset);
double longbench_sample_score(std::string_view dataset, std::string_view prediction,
                              std::span<const std::string> answers,
                              std::span<const std::string> all_classes);
// round(100 * sum / n, 2).
double longbench_dataset_score(std::span<const double> sample_scores);

// RULER (NVIDIA/RULER scripts/eval): the 13 tasks of synthetic.yaml, their metrics, and
// a sample's score after RULER's post-processing of the prediction.
std::span<const std::string_view> ruler_tasks();
Metric ruler_metric(std::string_view task);
double ruler_sample_score(std::string_view task, std::string_view prediction,
                          std::span<const std::string> outputs);
// round(sum / n * 100, 2).
double ruler_task_score(std::span<const double> sample_scores);

// Needle-in-a-Haystack sample score: ROUGE-1 F between the needle and the response, × 10
// (0-10, as eval's samples.jsonl records it).
double niah_score(std::string_view response, std::string_view needle);
// A NIAH sample score on the 0-100 scale of every report, table, plot and progress line
// (as RULER's and LongBench's 0-1 sample scores are shown × 100).
inline double niah_percent(double sample_score) { return 10 * sample_score; }

// The unweighted mean of dataset or task scores, rounded to 2 decimals.
double benchmark_average(std::span<const double> scores);

// Python's round(value, digits): to the nearest, ties (of the exact binary value) to even.
double python_round(double value, int digits);

}  // namespace deferkv::eval
