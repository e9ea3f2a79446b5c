#pragma once
// The one clock of a session's timings (SessionTimings): a scope adds its seconds to one of
// them, and may take them out of the phase it interrupts (a press's layer eviction runs
// inside the prompt's or the decode step's forward pass, and counts as eviction only).
#include <chrono>

namespace deferkv {

class ScopedTimer {
 public:
  // Adds the scope's seconds to `total`, and subtracts them from `*excluded_from` (if given).
  explicit ScopedTimer(double& total, double* excluded_from = nullptr)
      : total_(total), excluded_from_(excluded_from), start_(std::chrono::steady_clock::now()) {}
  ~ScopedTimer() {
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    total_ += seconds;
    if (excluded_from_ != nullptr) *excluded_from_ -= seconds;
  }
  ScopedTimer(const ScopedTimer&) = delete;
  ScopedTimer& operator=(const ScopedTimer&) = delete;

 private:
  double& total_;
  double* excluded_from_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace deferkv
