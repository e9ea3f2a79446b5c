#pragma once
// The process's resident memory as the OS counts it: its peak (Linux's high-water mark,
// VmHWM in /proc/self/status) for run summaries, and a way to start a new peak so one
// process can report the peak of each of several runs (bench-press).
#include <cstdint>

namespace deferkv {

// The most resident memory the process has held (since it started, or since the last
// reset_peak_rss), in bytes; getrusage's ru_maxrss where /proc cannot be read.
int64_t peak_rss_bytes();

// Starts a new peak at the process's current resident memory (writes 5 to
// /proc/self/clear_refs). False where the OS does not allow it: the peak then still
// counts from the process's start.
bool reset_peak_rss();

}  // namespace deferkv
