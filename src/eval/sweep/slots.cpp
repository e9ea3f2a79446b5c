#include "eval/sweep/slots.h"

#include <fmt/format.h>

#include "deferkv/error.h"
#include "eval/sweep/sample_log.h"

namespace deferkv::eval {

std::vector<SampleSlot> slots_of(const SweepPlan& plan) {
  std::vector<SampleSlot> slots;
  if (plan.benchmark == Benchmark::kNiah) {
    for (int64_t length : plan.lengths) {
      for (double depth : plan.depths) slots.push_back({"niah", length, 0, depth});
    }
    return slots;
  }
  if (plan.benchmark == Benchmark::kLongBench) {
    if (plan.rows.size() != plan.tasks.size()) fail("a LongBench plan needs the row count of each of its datasets");
    for (size_t d = 0; d < plan.tasks.size(); ++d) {
      for (int64_t i = 0; i < plan.rows[d]; ++i) slots.push_back({plan.tasks[d], 0, i, -1});
    }
    return slots;
  }
  for (const std::string& task : plan.tasks) {
    for (int64_t length : plan.lengths) {
      for (int64_t i = 0; i < plan.samples; ++i) slots.push_back({task, length, i, -1});
    }
  }
  return slots;
}

std::string row_key(const SweepPlan& plan, const std::string& method_identity, const SampleSlot& slot) {
  switch (plan.benchmark) {
    case Benchmark::kNiah: return SampleLog::niah_key(method_identity, slot.length, slot.depth);
    case Benchmark::kLongBench: return SampleLog::longbench_key(method_identity, slot.task, slot.index);
    case Benchmark::kRuler: break;
  }
  return SampleLog::ruler_key(method_identity, slot.task, slot.length, slot.index);
}

std::string row_text(const SweepPlan& plan, const SweepMethod& method, const SampleSlot& slot) {
  switch (plan.benchmark) {
    case Benchmark::kNiah: return fmt::format("{} niah {} depth {}%", method.label(), slot.length, slot.depth);
    case Benchmark::kLongBench: return fmt::format("{} {} #{}", method.label(), slot.task, slot.index);
    case Benchmark::kRuler: break;
  }
  return fmt::format("{} {} {} #{}", method.label(), slot.task, slot.length, slot.index);
}

}  // namespace deferkv::eval
