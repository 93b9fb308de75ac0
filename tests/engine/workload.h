// Seeded random workloads for the bank's equivalence harness, reusable by
// the SSD tier's tests and the server's (tests/engine/equivalence.h runs
// them).
//
// A workload is a list of steps over one bank: many conversations that share
// long prefixes (a few "system prompts"), grow turn by turn (a reply and a
// new user message appended, message_boundary at the new user message),
// exact replays of earlier prompts, prompts that diverge from an earlier one
// at kB - 1, kB, kB + 1 or inside a block, a second tenant, and eviction
// steps in between. Same options, same steps: the generator uses only its
// own seeded engine.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/engine.h"

namespace sb::testing {

struct WorkloadOptions {
  uint64_t seed = 1;
  int n_requests = 300;
  int64_t block_tokens = 64;
  int64_t vocab_size = 151936;
  int64_t max_prompt_tokens = 6 * 64 + 40;
  int max_new_tokens = 3;
  int n_system_prompts = 3;
  double evict_probability = 0.06;  // chance of an eviction step before a request
  double read_only_probability = 0.15;
  double echo_probability = 0.02;   // echo is costly (logits of every row): short prompts only
  int64_t echo_max_prompt_tokens = 80;
  std::vector<std::string> namespaces = {"", "tenant-b"};
};

struct WorkloadStep {
  enum class Kind { kRequest, kEvict };
  Kind kind = Kind::kRequest;
  CompletionRequest request;   // kRequest: cache_mode kDefault or kReadOnly
  std::string what;            // how the prompt was made, for failure messages
  double evict_fraction = 0;   // kEvict: share of the RAM tier's bytes to evict
};

std::vector<WorkloadStep> make_workload(const WorkloadOptions& options);

}  // namespace sb::testing
