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

// SplitMix64's step (the golden-ratio increment, then its finaliser): the
// mixing function of every random stream here (Sampler, the oracle drafter).
inline uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

struct SamplerConfig {
  float temperature = 0.0f;  // <= 0: greedy (argmax, lowest id on ties)
  float top_p = 1.0f;        // nucleus mass in (0, 1]
  int top_k = 0;             // 0: off
  uint64_t seed = 0;
  float min_p = 0.0f;        // 0: off; else keep tokens with p >= min_p * p_max (after temperature, top-k, top-p)
};

// The index a scan `if (logits[i] > logits[best]) best = i` ends on: the
// first of the largest, NaNs never taken (a NaN first element never beaten).
// Greedy sampling's token.
int32_t argmax(std::span<const float> logits);

// The min(k, logits.size()) ids of the largest logits, best first, ties to
// the lower id (top-k sampling's candidates, the top_logprobs alternatives):
// one pass over the row against the k-th best so far, not a sort of it.
std::vector<int32_t> best_ids(std::span<const float> logits, size_t k);

// log sum_i e^logits[i], the normaliser of the softmax: token i's log
// probability is logprob(logits, i, log_normaliser(logits)). The terms are
// e^(logit - max) from the CPU kernels' vexp, summed in one fixed order (16
// lanes over blocks of 1024 logits, the blocks' sums in double) in the CPU
// kernels' float mode (runtime/cpu/float_mode.h) on any thread, so the same
// logits always give the same bits; a 248k vocabulary takes about 0.1 ms.
double log_normaliser(std::span<const float> logits);

// What sampling reads of a row of logits, computed once beside the forward
// pass on the kernels' threads (Kernels::logit_stats): argmax(logits) and
// log_normaliser(logits), the same bits.
struct LogitStats {
  int32_t argmax = 0;
  double log_norm = 0.0;
};
LogitStats logit_stats(std::span<const float> logits);

// A speculative draft's token at one position and the distribution q it was
// drawn from (over the vocabulary); empty probs: a point mass on token.
struct DraftToken {
  int32_t token = 0;
  std::span<const float> probs;
};

class Sampler {
 public:
  explicit Sampler(const SamplerConfig& config) : config_(config), counter_(0) {}
  // stats, when given, must be logit_stats(logits): it saves a pass.
  int32_t sample(std::span<const float> logits, const LogitStats* stats = nullptr);
  // Speculative sampling (Leviathan et al. 2023, Chen et al. 2023) against
  // p, the distribution sample() draws from (temperature, top-k, top-p,
  // min-p, masked logits): returns draft.token with probability
  // min(1, p(token) / q(token)), else a draw from the residual (p - q)+
  // renormalised, which never is draft.token; so the token returned is
  // distributed as p whatever q. One uniform for the test, one more on a
  // rejection. Greedy: exactly sample() (the argmax, one uniform).
  int32_t sample_draft(std::span<const float> logits, const LogitStats* stats, const DraftToken& draft);

 private:
  // p up to its normaliser: candidate ids and their weights (zero for the
  // ones min-p drops), in the order a draw scans them.
  struct Candidates {
    std::vector<int32_t> ids;  // only the first weights.size() are candidates
    std::vector<double> weights;
  };
  Candidates candidates(std::span<const float> logits, int32_t best) const;
  // The candidate at u * total of the cumulative weights.
  static int32_t pick(const Candidates& c, double u);
  bool greedy() const { return config_.temperature <= 0.0f || config_.top_k == 1; }
  double next_uniform();  // in [0, 1)
  SamplerConfig config_;
  uint64_t counter_;
};

// logits[i] - log_norm in double, rounded once to float.
inline float logprob(std::span<const float> logits, size_t i, double log_norm) {
  return static_cast<float>(static_cast<double>(logits[i]) - log_norm);
}

}  // namespace sb
