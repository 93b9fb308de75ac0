// Engine: serves one completion request (token ids in, tokens and logprobs
// out) through the bank (docs/bank.md, "Lookup, restore, continue").
//
// Thread safety: complete() may be called from many threads at once.
// The promise: for any request, complete() in mode kDefault or kReadOnly gives
// the same tokens and bit-identical logprobs as in mode kBypass.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/status.h"

namespace sb {

enum class CacheMode { kDefault, kBypass, kReadOnly };

struct SamplingParams {
  float temperature = 0.0f;  // 0: greedy
  float top_p = 1.0f;
  int top_k = 0;             // 0: off
  uint64_t seed = 0;
};

struct TokenLogprob {
  int32_t token = 0;
  float logprob = 0.0f;
};

struct GeneratedToken {
  int32_t token = 0;
  float logprob = 0.0f;
  std::vector<TokenLogprob> top;  // top_logprobs alternatives, best first
};

// The restore record of one request (../shared/design/interface.md).
struct RestoreRecord {
  std::string mode = "cold";  // cold, ram, ssd, mixed, bypass
  int64_t restore_point = 0;
  int64_t matched_tokens = 0;
  int64_t common_prefix_tokens = 0;
  int64_t snapshot_position = 0;
  int64_t blocks = 0;
  uint64_t bytes_read = 0;
  int64_t checks = 0;
  int64_t check_failures = 0;
  int64_t prefill_tokens = 0;
  double lookup_ms = 0;
  double restore_ms = 0;
  double prefill_ms = 0;
};

struct CompletionRequest {
  std::vector<int32_t> prompt;
  int64_t max_tokens = 16;
  SamplingParams sampling;
  std::vector<int32_t> stop_tokens;  // generation ends after emitting one of these
  int top_logprobs = 0;              // alternatives per generated token
  bool echo = false;                 // also return logprobs of prompt tokens
  CacheMode cache_mode = CacheMode::kDefault;
  std::string name_space;            // tenant; never shares state with another
  int64_t message_boundary = -1;     // first token of a chat's final user message, or -1
  // Called for each generated token (streaming); returning false cancels.
  std::function<bool(const GeneratedToken&)> on_token;
};

struct CompletionResult {
  std::vector<GeneratedToken> tokens;
  std::vector<float> prompt_logprobs;  // echo: logprob of prompt token i given tokens < i (first is 0)
  std::string finish_reason;           // "stop", "length", "cancelled"
  RestoreRecord restore;
  double ttft_ms = 0;
};

}  // namespace sb
