#pragma once
// Running a batch engine to its end in tests, and its stats as each token came.
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "deferkv/batch_engine.h"

namespace deferkv::testing {

inline void step_until_idle(BatchEngine& engine) {
  for (int steps = 0; engine.step(); ++steps) ASSERT_LT(steps, 10000) << "the engine never went idle";
}

// Runs one sequence to its end and returns the engine's stats as each token came.
inline std::vector<BatchEngineStats> stats_at_each_token(BatchEngine& engine, SequenceRequest r) {
  std::vector<BatchEngineStats> at_token;
  SequenceCallbacks cb;
  cb.on_token = [&](int32_t) {
    at_token.push_back(engine.stats());
    return true;
  };
  engine.submit(std::move(r), std::move(cb));
  step_until_idle(engine);
  return at_token;
}

}  // namespace deferkv::testing
