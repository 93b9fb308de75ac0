// Sampling from one row of logits: greedy, temperature, top-k, top-p, min-p.
// Logits of -infinity (masked by a LogitsProcessor) are never drawn.
//
// Deterministic: the same logits, parameters and rng state always give the
// same token. The rng is a counter-based generator seeded per request, so
// results never depend on other requests or on timing.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace sb {

struct SamplerConfig {
  float temperature = 0.0f;  // <= 0: greedy (argmax, lowest id on ties)
  float top_p = 1.0f;        // nucleus mass in (0, 1]
  int top_k = 0;             // 0: off
  uint64_t seed = 0;
  float min_p = 0.0f;        // 0: off; else keep tokens with p >= min_p * p_max (after temperature, top-k, top-p)
};

class Sampler {
 public:
  explicit Sampler(const SamplerConfig& config) : config_(config), counter_(0) {}
  int32_t sample(std::span<const float> logits);

 private:
  double next_uniform();  // in [0, 1)
  SamplerConfig config_;
  uint64_t counter_;
};

// log_softmax of one row, computed in double and rounded once to float, so
// the same logits always give the same bits.
std::vector<float> log_softmax(std::span<const float> logits);

}  // namespace sb
