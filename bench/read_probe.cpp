#include "bench/read_probe.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>

#include "runtime/threads.h"

namespace sb::bench {

double ReadBandwidth::best() const { return passes.empty() ? 0 : *std::max_element(passes.begin(), passes.end()); }
double ReadBandwidth::worst() const { return passes.empty() ? 0 : *std::min_element(passes.begin(), passes.end()); }
double ReadBandwidth::median() const {
  if (passes.empty()) return 0;
  std::vector<double> v = passes;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}
void ReadBandwidth::merge(const ReadBandwidth& other) {
  passes.insert(passes.end(), other.passes.begin(), other.passes.end());
}

size_t read_probe_buffer_bytes() {
  // A virtual machine may report the whole socket's cache (hundreds of MiB):
  // 4 times it, capped, keeps the buffer far past any cache without taking
  // gigabytes from a shared machine.
  const long llc = sysconf(_SC_LEVEL3_CACHE_SIZE);
  const size_t four_llc = llc > 0 ? 4 * static_cast<size_t>(llc) : 0;
  return std::clamp<size_t>(four_llc, size_t(1) << 30, size_t(4) << 30);
}

namespace {

// Sums a slice with eight independent accumulators (vectorized by the
// compiler into wide loads); the sum keeps the loads from being dropped.
uint64_t sum_slice(const uint64_t* p, size_t n) {
  uint64_t acc[8] = {};
  for (size_t i = 0; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; ++k) acc[k] += p[i + k];
  uint64_t s = 0;
  for (uint64_t a : acc) s += a;
  return s;
}

}  // namespace

ReadBandwidth probe_read_bandwidth(int threads, int passes) {
  ReadBandwidth out;
  out.threads = threads;
  out.buffer_bytes = read_probe_buffer_bytes();
  const size_t n_words = out.buffer_bytes / sizeof(uint64_t);
  std::unique_ptr<uint64_t[]> buf(new uint64_t[n_words]);  // not touched here: first touch by the readers
  ThreadPool pool(threads);
  std::vector<uint64_t> sinks(static_cast<size_t>(threads));
  auto slice = [&](int64_t t, size_t* begin, size_t* end) {
    *begin = n_words * t / threads / 8 * 8;
    *end = n_words * (t + 1) / threads / 8 * 8;
  };
  pool.parallel_for(threads, [&](int64_t t) {
    size_t b, e;
    slice(t, &b, &e);
    std::fill(buf.get() + b, buf.get() + e, uint64_t{1});
  });
  size_t read_words = 0;  // the slices' words: what a pass reads, and what its sums add up to
  for (int t = 0; t < threads; ++t) {
    size_t b, e;
    slice(t, &b, &e);
    read_words += e - b;
  }
  for (int pass = -1; pass < passes; ++pass) {
    const auto t0 = std::chrono::steady_clock::now();
    pool.parallel_for(threads, [&](int64_t t) {
      size_t b, e;
      slice(t, &b, &e);
      sinks[static_cast<size_t>(t)] = sum_slice(buf.get() + b, e - b);
    });
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (pass >= 0) out.passes.push_back(static_cast<double>(read_words * sizeof(uint64_t)) / s);
  }
  uint64_t total = 0;
  for (uint64_t s : sinks) total += s;
  if (total != read_words)
    std::fprintf(stderr, "read probe: the passes summed %llu of %zu words\n", static_cast<unsigned long long>(total),
                 read_words);
  return out;
}

}  // namespace sb::bench
