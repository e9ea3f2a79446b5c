#pragma once
// CompressKV's offline calibration [docs/methods/compresskv.md, offline] on Needle-in-a-Haystack probes:
//  A. semantic retrieval heads: while the model copies the needle, every query head's
//     attention mass on the needle span is summed over the copying steps; heads are
//     ranked by their mean over the probes answered (ROUGE-1 recall above a threshold);
//  B. layer error scores: at each decode step of the answered probes, each layer's
//     attention output with the full cache is compared with the output restricted to
//     the retrieval heads' choice of 32 prompt entries (24 + a window of 8, generated
//     tokens kept): sum of ||O_cut - O_full|| / (||O_full|| + 1e-5), L1-normalised.
// Departures: the probes are our NIAH prompts (Paul Graham essays, the San Francisco
// needle) instead of the Retrieval-Head project's haystacks and needles.jsonl; step B
// runs on those probes instead of the 16 LongBench datasets, and compares the heads'
// outputs before the output projection (o_proj), which presses cannot see.
// [OUR FORMULATION] Probes "ruler": RULER's S-NIAH-1 samples (niah_single_1, a number hidden in
// noise and asked for by its key), the needle span being the number's tokens, for models that
// answer RULER's wording but not NIAH's (the embedded retrieval model).
#include <cstdint>
#include <string>
#include <vector>

#include "deferkv/session.h"
#include "press/core/compresskv_profile.h"

namespace deferkv::eval {

enum class CalibrationProbes { kNiah, kRuler };
CalibrationProbes calibration_probes_from_name(const std::string& name);  // "niah", "ruler"

struct CompressKvCalibrationOptions {
  CalibrationProbes probes = CalibrationProbes::kNiah;
  std::vector<int64_t> lengths = {1000, 2000, 3000};
  std::vector<double> depths;       // NIAH probes; empty: NIAH's default grid
  int64_t samples = 10;             // RULER probes per length
  int64_t first_k = 4;              // retrieval heads kept per layer
  double min_recall = 50;           // ROUGE-1 recall (x100) a probe's answer needs to count
  int64_t max_new_tokens = 50;
};

struct CompressKvCalibration {
  CompressKvProfile profile;
  int64_t probes = 0;
  int64_t answered = 0;
  std::vector<std::vector<double>> head_scores;  // [layer][head]
};

// Fails when no probe is answered (the model does not retrieve, so no head can be found).
CompressKvCalibration calibrate_compresskv(Session& session, const CompressKvCalibrationOptions& options);

}  // namespace deferkv::eval
