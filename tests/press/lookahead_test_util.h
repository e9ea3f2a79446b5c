#pragma once
// LookaheadKV weights built in the tests (random values, fixed seeds), and their
// double-precision form for the reference forward.
#include <cstdint>
#include <string>

#include "model/reference_forward.h"
#include "press/methods/lookaheadkv/lookahead_weights.h"

namespace deferkv::testing {

// The shape of the model at `gguf_path`, as a press sees it.
PressModelShape model_shape(const std::string& gguf_path);

// Weights fitting `shape`: n_lookahead Gaussian embedding rows and a rank-`rank` delta for
// each of the seven projections of every layer (alpha = 2 * rank). B is Gaussian times
// b_scale (0: every delta is zero, A still random).
LookaheadWeights random_lookahead_weights(const PressModelShape& shape, int64_t n_lookahead, int64_t rank,
                                          float b_scale, uint32_t seed);

// The same rows and deltas in double precision.
ReferenceRows reference_rows(const LookaheadWeights& weights);

// A weights file (6 rows, rank 4) for press_test_model_path()'s model, written once.
std::string press_test_lookahead_weights_path();

}  // namespace deferkv::testing
