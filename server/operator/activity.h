// Activity: what the operator's page shows of recent traffic
// (GET /v1/bank/requests): the last completed requests with their restore
// records (operator view: miss reasons include other_namespace), and per-
// minute totals for the last hour (requests, prompt and cached tokens, time
// to first token of cold and of restored requests).
//
// Thread safety: every method locks one mutex (touched once per request).
#pragma once

#include <cstdint>
#include <deque>
#include <mutex>
#include <string>

#include "engine/engine.h"
#include "server/transport/sse.h"

namespace sb {

struct CompletedRequest {
  std::string id;          // the X-Request-Id
  int64_t time_ms = 0;     // Unix ms when it finished
  std::string endpoint;    // "/v1/completions" or "/v1/chat/completions"
  std::string name_space;  // the bank namespace it used
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  double ttft_ms = 0;
  RestoreRecord restore;
};

class Activity {
 public:
  static constexpr size_t kRecent = 100;
  static constexpr int64_t kBucketMs = 60'000;
  static constexpr size_t kBuckets = 60;

  void record(CompletedRequest request);
  // {"requests": [newest first, at most `limit`], "minutes": [oldest first]}.
  ResponseJson to_json(size_t limit) const;

 private:
  struct Minute {
    int64_t start_ms = 0;
    uint64_t requests = 0, restored = 0;
    uint64_t prompt_tokens = 0, cached_tokens = 0;
    uint64_t cold = 0, warm = 0;        // requests without and with a restore
    double cold_ttft_ms = 0, warm_ttft_ms = 0;  // sums
  };
  mutable std::mutex mu_;
  std::deque<CompletedRequest> recent_;  // newest at the back
  std::deque<Minute> minutes_;           // oldest at the front
};

}  // namespace sb
