#pragma once
// The flattened grid of a plan: its samples (task, length, sample), (length, depth) or
// (dataset, row), each run by every method; a row is one (slot, method) and has one key.
#include <cstdint>
#include <string>
#include <vector>

#include "deferkv/eval_sweep.h"

namespace deferkv::eval {

struct SampleSlot {
  std::string task;  // "niah" for NIAH, the dataset for LongBench
  int64_t length;    // RULER, NIAH
  int64_t index;     // RULER, LongBench
  double depth;      // NIAH
};

// In run order: task, length, sample (RULER); length, depth (NIAH); dataset, row (LongBench,
// from plan.rows).
std::vector<SampleSlot> slots_of(const SweepPlan& plan);

// The key SampleLog::key_of gives the row's record.
std::string row_key(const SweepPlan& plan, const std::string& method_identity, const SampleSlot& slot);

// "snapkv@64 fwe 4096 #3": a row as the user reads it in progress lines and errors.
std::string row_text(const SweepPlan& plan, const SweepMethod& method, const SampleSlot& slot);

}  // namespace deferkv::eval
