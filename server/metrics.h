// Metrics: the server's counters and the time-to-first-token histogram,
// rendered in the Prometheus text format (version 0.0.4) for GET /metrics.
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
#include "server/backend.h"

namespace sb {

class Metrics {
 public:
  // Upper bounds (seconds) of the time-to-first-token buckets; +Inf follows.
  static constexpr std::array<double, 14> kTtftBuckets = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                                                          1.0,   2.5,  5.0,   10.0, 30.0, 60.0, 120.0};

  void record_request(const std::string& endpoint, int status);
  // A completion that ran in the engine.
  void record_completion(const RestoreRecord& restore, int64_t prompt_tokens, int64_t completion_tokens, double ttft_ms);

  // `queued` and `running` are sampled by the caller at render time.
  std::string render(const BankStatsView& bank, size_t queued, size_t running) const;

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string, int>, uint64_t> requests_;
  uint64_t prompt_tokens_ = 0;
  uint64_t completion_tokens_ = 0;
  std::array<uint64_t, RestoreMode::kCount> cached_tokens_{};  // by RestoreMode::index()
  std::array<uint64_t, RestoreMode::kCount> restores_{};       // by RestoreMode::index()
  uint64_t restore_check_failures_ = 0;
  std::array<uint64_t, kTtftBuckets.size() + 1> ttft_counts_{};
  double ttft_sum_s_ = 0;
  uint64_t ttft_count_ = 0;
};

}  // namespace sb
