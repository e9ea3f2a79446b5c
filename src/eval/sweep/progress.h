#pragma once
// The sweep's progress line: samples done of all, the sample at hand, its score, and the
// time left at the average pace of the samples run so far. On a terminal one line is
// rewritten; elsewhere (logs, pipes) each sample gets a line.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace deferkv::eval {

class Progress {
 public:
  // `done`: samples already in the log when the run starts.
  Progress(std::FILE* out, int64_t total, int64_t done);
  // `score` on the reports' scale.
  void sample_done(const std::string& what, double score);
  // A row that could not run (run_sweep records it as failed).
  void sample_failed(const std::string& what);
  void finish();

  // "1h 02m", "3m 07s", "12s".
  static std::string duration(double seconds);

 private:
  // Counts a row done and prints its line: "[done/total] pct% <what> | s/sample | ...".
  void show(const std::string& what);

  std::FILE* out_;
  bool terminal_;
  int64_t total_, done_, run_ = 0;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

}  // namespace deferkv::eval
