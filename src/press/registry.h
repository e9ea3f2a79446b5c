#pragma once
// The list of press methods. Each method file under methods/ defines one function
// returning its PressMethod; registry.cpp lists them.
#include <memory>

#include "deferkv/press.h"
#include "press/press_params.h"

namespace deferkv {

struct PressMethod {
  PressInfo info;
  std::unique_ptr<Press> (*make)(const PressParams& params, const KvBudget& budget);
};

PressMethod full_method();
PressMethod streaming_llm_method();
PressMethod h2o_method();
PressMethod tova_method();
PressMethod knorm_method();
PressMethod expected_attention_method();
PressMethod snapkv_method();
PressMethod pyramidkv_method();
PressMethod adakv_method();
PressMethod chunkkv_method();
PressMethod deferkv_method();
PressMethod moment_kv_method();
PressMethod laq_method();
PressMethod laqpp_method();
PressMethod speckv_method();
PressMethod compresskv_method();
PressMethod lookaheadkv_method();
PressMethod behavior_preserving_method();

}  // namespace deferkv
