// Speculative sampling (Sampler::sample_draft) against the distribution p
// that sample() draws from: whatever the draft (a point mass on a likely, an
// unlikely, a cut or a masked token, or a dense q unlike p), the tokens it
// returns follow p, it accepts a draft drawn from q with probability
// sum min(p, q), never returns a rejected draft, and greedy
// sampling returns sample()'s tokens. Deterministic seeds: every run draws
// the same numbers; the bounds are many standard deviations wide.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "runtime/sampling.h"

namespace sb {
namespace {

constexpr int kDraws = 200000;
// Each frequency's standard deviation is at most sqrt(0.25 / kDraws), about
// 0.0011: 0.01 is nine of them.
constexpr double kBound = 0.01;

const std::vector<float> kLogits = {1.5f, 0.2f, 2.1f, -0.7f, 0.9f, 1.9f, -3.0f, 0.4f};

// p as the test computes it: temperature, then the top_k best, renormalised.
std::vector<double> target(const std::vector<float>& logits, float temperature, int top_k) {
  std::vector<int> ids(logits.size());
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int>(i);
  std::sort(ids.begin(), ids.end(), [&](int a, int b) { return logits[a] > logits[b]; });
  std::vector<double> p(logits.size(), 0.0);
  double total = 0.0;
  for (int k = 0; k < top_k; ++k) total += p[ids[k]] = std::exp(logits[ids[k]] / temperature);
  for (double& v : p) v /= total;
  return p;
}

struct Drawn {
  std::vector<double> freq;
  double accepted = 0;
};

Drawn draw(const std::vector<float>& logits, const SamplerConfig& config, const DraftToken& draft) {
  Sampler sampler(config);
  Drawn d{std::vector<double>(logits.size(), 0.0)};
  for (int i = 0; i < kDraws; ++i) {
    const int32_t t = sampler.sample_draft(logits, nullptr, draft);
    d.freq[static_cast<size_t>(t)] += 1.0 / kDraws;
    d.accepted += (t == draft.token) / static_cast<double>(kDraws);
  }
  return d;
}

TEST(SamplingRejection, APointMassDraftKeepsTheTargetDistribution) {
  const SamplerConfig config{0.8f, 1.0f, 5, 11};
  const std::vector<double> p = target(kLogits, 0.8f, 5);
  // The top 5 are 2, 5, 0, 4, 7: the likeliest, a middle one, the least
  // likely kept, and two that top-k cuts (never accepted).
  for (int32_t token : {2, 0, 7, 3, 6}) {
    SCOPED_TRACE(token);
    const Drawn d = draw(kLogits, config, DraftToken{token, {}});
    for (size_t i = 0; i < p.size(); ++i) EXPECT_NEAR(d.freq[i], p[i], kBound) << i;
    EXPECT_NEAR(d.accepted, p[static_cast<size_t>(token)], kBound);
  }
}

TEST(SamplingRejection, AMaskedDraftIsNeverAccepted) {
  std::vector<float> masked = kLogits;
  masked[2] = -std::numeric_limits<float>::infinity();  // a grammar mask
  const SamplerConfig config{1.0f, 1.0f, 0, 5};
  const Drawn d = draw(masked, config, DraftToken{2, {}});
  EXPECT_EQ(d.freq[2], 0.0);
  std::vector<float> rest = masked;
  rest.erase(rest.begin() + 2);
  std::vector<double> p = target(rest, 1.0f, static_cast<int>(rest.size()));
  p.insert(p.begin() + 2, 0.0);
  for (size_t i = 0; i < p.size(); ++i) EXPECT_NEAR(d.freq[i], p[i], kBound) << i;
}

TEST(SamplingRejection, ADenseDraftAcceptsMinPOverQAndKeepsTheTarget) {
  const SamplerConfig config{1.0f, 1.0f, 0, 23};
  const std::vector<double> p = target(kLogits, 1.0f, static_cast<int>(kLogits.size()));
  // A q unlike p (mass where p has little); each draft token drawn from it,
  // as a model-side drafter's is, by a stream of its own.
  const std::vector<float> q = {0.05f, 0.3f, 0.05f, 0.2f, 0.1f, 0.05f, 0.2f, 0.05f};
  std::mt19937_64 rng(99);
  std::discrete_distribution<int32_t> from_q(q.begin(), q.end());
  Sampler sampler(config);
  std::vector<double> freq(p.size(), 0.0);
  double accepted = 0, expected = 0;
  for (size_t i = 0; i < p.size(); ++i) expected += std::min(p[i], static_cast<double>(q[i]));
  for (int i = 0; i < kDraws; ++i) {
    const int32_t x = from_q(rng);
    const int32_t t = sampler.sample_draft(kLogits, nullptr, DraftToken{x, q});
    freq[static_cast<size_t>(t)] += 1.0 / kDraws;
    accepted += (t == x) / static_cast<double>(kDraws);
  }
  for (size_t i = 0; i < p.size(); ++i) EXPECT_NEAR(freq[i], p[i], kBound) << i;
  // Accepted with probability sum_x q(x) min(1, p(x) / q(x)) = sum min(p, q).
  EXPECT_NEAR(accepted, expected, kBound);
}

TEST(SamplingRejection, GreedyIsPlainSampling) {
  for (const SamplerConfig& config : {SamplerConfig{0.0f, 1.0f, 0, 3}, SamplerConfig{0.7f, 1.0f, 1, 3}}) {
    Sampler plain(config), judged(config);
    for (int i = 0; i < 100; ++i) {
      std::vector<float> logits = kLogits;
      logits[static_cast<size_t>(i % 8)] += 3.0f;
      ASSERT_EQ(judged.sample_draft(logits, nullptr, DraftToken{static_cast<int32_t>(i % 5), {}}),
                plain.sample(logits));
    }
  }
}

}  // namespace
}  // namespace sb
