#pragma once
// Small random models written once per test run into a temporary folder.
#include <string>

#include "model/random_model.h"

namespace deferkv::testing {

// Path of a random model for the spec (written on first use, reused after).
std::string random_model_path(const RandomModelSpec& spec);

// The embedded default model (stories260K).
std::string stories_model_path();

}  // namespace deferkv::testing
