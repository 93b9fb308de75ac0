// Metrics: the server's counters and histograms (time to first token,
// restore bytes and time), rendered in the Prometheus text format (version
// 0.0.4) for GET /metrics. Miss reasons are counted as the operator sees
// them (operator_miss_reason: other_namespace included).
//
// Thread safety: every method may be called from many threads at once (one
// mutex; the counters are touched once per request, not per token).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "engine/engine.h"
#include "server/backend/bank_admin.h"

namespace sb {

// What other parts count, sampled by the caller at render time.
struct ServingCounts {
  // Responses cut off before they were written whole, by why
  // (Connections::cuts(), server/transport/connections.h).
  uint64_t cut_deadline = 0, cut_share = 0, cut_buffer = 0;
  // cache_control pins refused (the request ran unpinned), by which of the
  // tenant's budgets was full (PinBudget::refused(), server/pin_budget.h).
  uint64_t pins_refused_count = 0, pins_refused_bytes = 0;
};

class Metrics {
 public:
  // Upper bounds (seconds) of the time-to-first-token buckets; +Inf follows.
  static constexpr std::array<double, 14> kTtftBuckets = {0.005, 0.01, 0.025, 0.05, 0.1,  0.25, 0.5,
                                                          1.0,   2.5,  5.0,   10.0, 30.0, 60.0, 120.0};
  // Restores (requests with restore_point > 0): bytes read, and seconds of
  // lookup plus restore.
  static constexpr std::array<double, 10> kRestoreByteBuckets = {1e5,   1e6, 4e6, 16e6, 64e6,
                                                                 256e6, 1e9, 4e9, 16e9, 64e9};
  static constexpr std::array<double, 12> kRestoreSecondBuckets = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                                                   0.1,   0.25,   0.5,   1.0,  2.5,   10.0};

  template <size_t N>
  struct Histogram {
    std::array<uint64_t, N + 1> counts{};  // the last is +Inf
    double sum = 0;
    uint64_t count = 0;
    void add(const std::array<double, N>& bounds, double v) {
      size_t b = 0;
      while (b < N && v > bounds[b]) ++b;
      ++counts[b];
      sum += v;
      ++count;
    }
  };

  void record_request(const std::string& endpoint, int status);
  // A completion that ran in the engine.
  void record_completion(const RestoreRecord& restore, int64_t prompt_tokens, int64_t completion_tokens,
                         double ttft_ms);
  // What speculation did for it (engine/speculation.h).
  void record_speculation(const SpeculativeRecord& r);

  // `queued` and `running` are sampled by the caller at render time.
  std::string render(const BankStatsView& bank, size_t queued, size_t running, const ServingCounts& counts = {}) const;

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string, int>, uint64_t> requests_;
  uint64_t prompt_tokens_ = 0;
  uint64_t completion_tokens_ = 0;
  std::array<uint64_t, RestoreMode::kCount> cached_tokens_{};  // by RestoreMode::index()
  std::array<uint64_t, RestoreMode::kCount> restores_{};       // by RestoreMode::index()
  uint64_t restore_check_failures_ = 0;
  SpeculativeRecord speculative_;  // summed over completions
  Histogram<kTtftBuckets.size()> ttft_;
  Histogram<kRestoreByteBuckets.size()> restore_bytes_;
  Histogram<kRestoreSecondBuckets.size()> restore_seconds_;
  uint64_t full_hits_ = 0, partial_hits_ = 0;
  std::array<uint64_t, kMissReasons> misses_{};  // by operator_miss_reason
};

}  // namespace sb
