// What the machine did to a measurement besides running the measured code,
// read from /proc, so that a slow run says why: how much of the process's
// anonymous memory (the packed weights, the state, the buffers) got 2 MiB
// pages, how long its threads waited for a CPU while runnable (other work on
// the machine), and how long the host took the VM's CPUs away (steal). A
// decode that read slower while none of these moved was slowed by the memory
// itself. Zeros where /proc lacks a file.
#pragma once

#include <cstdint>

namespace sb::bench {

struct HugePageCoverage {
  uint64_t anon_bytes = 0;       // anonymous resident memory of this process
  uint64_t anon_huge_bytes = 0;  // of it, in transparent huge pages
  double share() const { return anon_bytes ? static_cast<double>(anon_huge_bytes) / anon_bytes : 0.0; }
};

// This process's, from /proc/self/smaps_rollup.
HugePageCoverage huge_page_coverage();

// Clocks that run while a process is kept from running, in seconds since
// some fixed moment: a measurement's difference of two readings.
struct WaitClocks {
  double runnable_wait = 0;  // summed over this process's threads (/proc/self/task/*/schedstat)
  double steal = 0;          // summed over the VM's CPUs (/proc/stat)
};

WaitClocks wait_clocks();

// Between two readings taken `wall` seconds apart: the share of `threads`
// threads' wall time spent waiting runnable, and the share of the machine's
// CPU time the host stole.
struct WaitShares {
  double runnable_wait = 0, steal = 0;
};
WaitShares wait_shares(const WaitClocks& before, const WaitClocks& after, double wall, int threads);

}  // namespace sb::bench
