// The read-bandwidth probe behind "decode at % of the read-bandwidth bound"
// (runtime_bench, compare_llama.sh): how fast `threads` threads of the
// runtime's own ThreadPool, the kind a decode step runs on, stream a buffer
// far larger than the last-level cache, read only (a copy would count every
// byte twice). Each thread reads its own contiguous slice with wide loads and
// the passes are timed one by one, so a pass that another process disturbed
// shows as a low sample instead of lowering an average: the best pass is the
// bound, the others its spread. On a shared machine every number is
// indicative only.
#pragma once

#include <cstddef>
#include <vector>

namespace sb::bench {

struct ReadBandwidth {
  int threads = 0;
  size_t buffer_bytes = 0;
  std::vector<double> passes;  // bytes per second of each timed pass, in the order run
  double best() const;
  double median() const;
  double worst() const;
  // Adds another probe's passes (same threads), e.g. one run after the measurements.
  void merge(const ReadBandwidth& other);
};

// The buffer: 4 times the last-level cache the OS reports, at least 1 GiB and at most 4 GiB.
size_t read_probe_buffer_bytes();

// REQUIRES: threads >= 1, passes >= 1. One untimed pass first (pages faulted
// in on the threads that read them, caches and the pool warmed).
ReadBandwidth probe_read_bandwidth(int threads, int passes);

}  // namespace sb::bench
