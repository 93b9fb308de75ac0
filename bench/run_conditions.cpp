#include "bench/run_conditions.h"

#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

namespace sb::bench {

HugePageCoverage huge_page_coverage() {
  HugePageCoverage out;
  std::ifstream f("/proc/self/smaps_rollup");
  std::string line;
  while (std::getline(f, line)) {
    const uint64_t bytes = 1024 * std::strtoull(line.c_str() + line.find(':') + 1, nullptr, 10);
    if (line.rfind("Anonymous:", 0) == 0) out.anon_bytes = bytes;
    if (line.rfind("AnonHugePages:", 0) == 0) out.anon_huge_bytes = bytes;
  }
  return out;
}

namespace {

// The second field of a thread's schedstat: nanoseconds spent runnable on a run queue.
double threads_runnable_wait() {
  double seconds = 0;
  DIR* dir = opendir("/proc/self/task");
  if (!dir) return 0;
  while (const dirent* e = readdir(dir)) {
    if (e->d_name[0] == '.') continue;
    std::ifstream f(std::string("/proc/self/task/") + e->d_name + "/schedstat");
    uint64_t run_ns = 0, wait_ns = 0;
    if (f >> run_ns >> wait_ns) seconds += static_cast<double>(wait_ns) * 1e-9;
  }
  closedir(dir);
  return seconds;
}

// The aggregate "cpu" line's eighth value, in clock ticks.
double machine_steal() {
  std::ifstream f("/proc/stat");
  std::string line;
  if (!std::getline(f, line)) return 0;
  std::istringstream fields(line);
  std::string name;
  uint64_t v[8] = {};
  fields >> name;
  for (uint64_t& x : v) fields >> x;
  const long hz = sysconf(_SC_CLK_TCK);
  return hz > 0 ? static_cast<double>(v[7]) / static_cast<double>(hz) : 0;
}

}  // namespace

WaitClocks wait_clocks() { return {threads_runnable_wait(), machine_steal()}; }

WaitShares wait_shares(const WaitClocks& before, const WaitClocks& after, double wall, int threads) {
  if (wall <= 0) return {};
  const double cpus = std::max(1u, std::thread::hardware_concurrency());
  return {(after.runnable_wait - before.runnable_wait) / (wall * threads), (after.steal - before.steal) / (wall * cpus)};
}

}  // namespace sb::bench
