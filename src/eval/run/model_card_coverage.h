#pragma once
// What the embedded retrieval model's card (models/README.md) says it can answer: RULER's
// retrieval wording, nothing else. `deferkv eval` warns before a sweep the card does not
// cover (NIAH, LongBench), whose scores on that model are noise, not a method's merit.
#include <cstdio>

#include "deferkv/score_predictions.h"
#include "deferkv/model.h"

namespace deferkv::eval {

// Prints the warning on `out` (may be null) when `model` is the embedded retrieval model and `benchmark`
// is one its card does not cover; says nothing for other models, whose cards eval cannot read.
void warn_if_card_does_not_cover(const Model& model, Benchmark benchmark, std::FILE* out);

}  // namespace deferkv::eval
