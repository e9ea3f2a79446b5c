#pragma once
// `deferkv eval`'s kept-token maps: for each compressed row (method@budget), the layers ×
// prompt positions map (eval/plots/kept_map.h) of the first sample the row runs, written to
// kept-<label>.svg in the results folder. A map already there is kept, so a resumed or
// grown sweep draws the maps of its new rows only.
#include <set>
#include <string>

#include "deferkv/eval_sweep.h"
#include "engine/kept_set_recorder.h"

namespace deferkv::eval {

class KeptMaps {
 public:
  explicit KeptMaps(std::string dir) : dir_(std::move(dir)) {}

  // Whether `method`'s map is still to be drawn ("full" has none: it evicts nothing).
  bool wanted(const SweepMethod& method) const;
  void write(const SweepMethod& method, const TaskSample& sample, const KeptSetRecorder& kept);

 private:
  std::string dir_;
  std::set<std::string> written_;  // labels
};

}  // namespace deferkv::eval
