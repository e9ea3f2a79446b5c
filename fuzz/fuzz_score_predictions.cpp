// Predictions files for `deferkv score` (JSON Lines of LongBench, RULER or NIAH
// predictions). The first byte picks the benchmark (% 4: from the first line, LongBench,
// RULER, NIAH), the rest is the file. Asserts: only deferkv::Error escapes; there is a
// row; in every row each group has samples and a score in range (0..100, NIAH too),
// and the row's average is their mean.
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>

#include "deferkv/score_predictions.h"
#include "fuzz_support.h"

using namespace deferkv;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::optional<eval::Benchmark> benchmark;
  if (data[0] % 4 != 0) benchmark = static_cast<eval::Benchmark>(data[0] % 4 - 1);
  eval::PredictionScores scores;
  if (!fuzz::accepts([&] { scores = eval::score_predictions(fuzz::as_text(data + 1, size - 1), "fuzz", benchmark); })) {
    return 0;
  }
  const double top = 100;  // every benchmark on the reports' 0-100 scale
  fuzz::require(!scores.rows.empty(), "scored predictions have a row");
  for (const eval::MethodScores& row : scores.rows) {
    double sum = 0;
    for (const eval::GroupScore& g : row.groups) {
      fuzz::require(g.samples > 0, "every group has samples");
      fuzz::require(g.score >= 0 && g.score <= top, "group scores are in range");
      sum += g.score;
    }
    if (!row.groups.empty()) {
      fuzz::require(std::abs(row.average - sum / static_cast<double>(row.groups.size())) <= 0.006,
                    "the average is the groups' mean (to its rounding)");
    }
  }
  return 0;
}
