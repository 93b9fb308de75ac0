#include "bench/read_probe.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

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

// Eight independent accumulators, vectorized by the compiler into wide loads.
uint64_t sum_words(const uint64_t* p, size_t n) {
  uint64_t acc[8] = {};
  for (size_t i = 0; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; ++k) acc[k] += p[i + k];
  uint64_t s = 0;
  for (uint64_t a : acc) s += a;
  return s;
}

ReadProbe::ReadProbe(int threads)
    : threads_(threads),
      bytes_(read_probe_buffer_bytes()),
      buf_(new uint64_t[bytes_ / sizeof(uint64_t)]),  // not touched here: first touch by the readers
      pool_(std::make_unique<ThreadPool>(threads)),
      sinks_(static_cast<size_t>(threads)) {
  pool_->parallel_for(threads_, [&](int64_t t) {
    size_t b, e;
    slice(t, &b, &e);
    std::fill(buf_.get() + b, buf_.get() + e, uint64_t{1});
  });
  for (int t = 0; t < threads_; ++t) {
    size_t b, e;
    slice(t, &b, &e);
    read_words_ += e - b;
  }
  pass();  // untimed: caches and the pool warmed
}

ReadProbe::~ReadProbe() = default;

void ReadProbe::slice(int64_t t, size_t* begin, size_t* end) const {
  const size_t n_words = bytes_ / sizeof(uint64_t);
  *begin = n_words * t / threads_ / 8 * 8;
  *end = n_words * (t + 1) / threads_ / 8 * 8;
}

double ReadProbe::pass() {
  const auto t0 = std::chrono::steady_clock::now();
  pool_->parallel_for(threads_, [&](int64_t t) {
    size_t b, e;
    slice(t, &b, &e);
    sinks_[static_cast<size_t>(t)] = sum_words(buf_.get() + b, e - b);
  });
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  uint64_t total = 0;
  for (uint64_t x : sinks_) total += x;
  if (total != read_words_)
    std::fprintf(stderr, "read probe: the pass summed %llu of %zu words\n", static_cast<unsigned long long>(total),
                 read_words_);
  return static_cast<double>(read_words_ * sizeof(uint64_t)) / s;
}

ReadBandwidth probe_read_bandwidth(int threads, int passes) {
  ReadProbe probe(threads);
  ReadBandwidth out;
  out.threads = threads;
  out.buffer_bytes = probe.buffer_bytes();
  for (int pass = 0; pass < passes; ++pass) out.passes.push_back(probe.pass());
  return out;
}

std::string read_bandwidth_json(const std::map<int64_t, ReadBandwidth>& probes) {
  std::string best = "\"read_bandwidth\": {", passes = "\"read_bandwidth_passes\": {";
  char num[64];
  for (const auto& [t, probe] : probes) {
    const char* sep = t == probes.begin()->first ? "" : ", ";
    std::snprintf(num, sizeof num, "%s\"%lld\": %.0f", sep, static_cast<long long>(t), probe.best());
    best += num;
    std::snprintf(num, sizeof num, "%s\"%lld\": [", sep, static_cast<long long>(t));
    passes += num;
    for (size_t k = 0; k < probe.passes.size(); ++k) {
      std::snprintf(num, sizeof num, "%s%.0f", k ? ", " : "", probe.passes[k]);
      passes += num;
    }
    passes += "]";
  }
  return best + "}, " + passes + "}";
}

}  // namespace sb::bench
