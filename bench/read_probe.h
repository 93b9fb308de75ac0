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
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace sb {
class ThreadPool;
}

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

// The probe's read of n words (n a multiple of 8): their sum, so that the
// loads stay. For reading another buffer as a probe pass reads its own.
uint64_t sum_words(const uint64_t* p, size_t n);

// The probe's buffer and threads, kept between passes, so that passes can be
// interleaved with other work: a decode measured against the bandwidth of the
// same moment, on a machine whose bandwidth drifts between moments.
class ReadProbe {
 public:
  // REQUIRES: threads >= 1. Faults the buffer in on the threads that read
  // it, then runs one untimed pass (caches and the pool warmed).
  explicit ReadProbe(int threads);
  ~ReadProbe();
  ReadProbe(const ReadProbe&) = delete;
  ReadProbe& operator=(const ReadProbe&) = delete;

  double pass();  // bytes per second of one timed pass over the whole buffer
  size_t buffer_bytes() const { return bytes_; }

 private:
  void slice(int64_t t, size_t* begin, size_t* end) const;  // thread t's words
  int threads_;
  size_t bytes_, read_words_ = 0;  // read_words_: what a pass reads, and what its sums add up to
  std::unique_ptr<uint64_t[]> buf_;
  std::unique_ptr<ThreadPool> pool_;
  std::vector<uint64_t> sinks_;
};

// REQUIRES: threads >= 1, passes >= 1. A ReadProbe's passes.
ReadBandwidth probe_read_bandwidth(int threads, int passes);

// Per thread count, the best pass and every pass in bytes per second, as two
// members of a JSON object (no braces): "read_bandwidth": {"2": best, ...},
// "read_bandwidth_passes": {"2": [pass, ...], ...}. runtime_bench prints
// them in its --json report and alone with --probe; compare_llama.py reads
// both.
std::string read_bandwidth_json(const std::map<int64_t, ReadBandwidth>& probes);

}  // namespace sb::bench
