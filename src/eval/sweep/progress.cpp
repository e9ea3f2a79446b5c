#include "eval/sweep/progress.h"

#include <unistd.h>

#include <cmath>

#include <fmt/format.h>

namespace deferkv::eval {

Progress::Progress(std::FILE* out, int64_t total, int64_t done)
    : out_(out), terminal_(out != nullptr && ::isatty(::fileno(out)) != 0), total_(total), done_(done) {
  if (out_ != nullptr && done_ > 0) fmt::print(out_, "resuming: {} of {} samples already done\n", done_, total_);
}

std::string Progress::duration(double seconds) {
  const auto s = static_cast<int64_t>(std::llround(seconds));
  if (s >= 3600) return fmt::format("{}h {:02}m", s / 3600, s % 3600 / 60);
  if (s >= 60) return fmt::format("{}m {:02}s", s / 60, s % 60);
  return fmt::format("{}s", s);
}

void Progress::sample_done(const std::string& what, double score) { show(fmt::format("{} score {:.1f}", what, score)); }

void Progress::sample_failed(const std::string& what) { show(what + " FAILED"); }

void Progress::show(const std::string& what) {
  ++done_;
  ++run_;
  if (out_ == nullptr) return;
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const double left = elapsed / static_cast<double>(run_) * static_cast<double>(total_ - done_);
  const std::string line = fmt::format("[{}/{}] {:.0f}% {} | {:.2f} s/sample | elapsed {} | ETA {}",
                                       done_, total_, 100.0 * static_cast<double>(done_) / static_cast<double>(total_),
                                       what, elapsed / static_cast<double>(run_), duration(elapsed), duration(left));
  if (terminal_) {
    fmt::print(out_, "\r\x1b[2K{}", line);
  } else {
    fmt::print(out_, "{}\n", line);
  }
  std::fflush(out_);
}

void Progress::finish() {
  if (out_ != nullptr && terminal_ && run_ > 0) fmt::print(out_, "\n");
}

}  // namespace deferkv::eval
