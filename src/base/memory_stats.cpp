#include "base/memory_stats.h"

#include <sys/resource.h>

#include <fstream>
#include <string>

namespace deferkv {

int64_t peak_rss_bytes() {
  std::ifstream status("/proc/self/status");
  std::string key;
  int64_t kib = 0;
  while (status >> key) {
    if (key == "VmHWM:" && status >> kib) return kib * 1024;  // the file says "kB": KiB
    status.ignore(1 << 10, '\n');
  }
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  return static_cast<int64_t>(usage.ru_maxrss) * 1024;  // Linux reports KiB
}

bool reset_peak_rss() {
  std::ofstream clear("/proc/self/clear_refs");
  clear << "5\n";
  clear.flush();
  return static_cast<bool>(clear);
}

}  // namespace deferkv
