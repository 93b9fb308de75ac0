// Sampler: greedy ties, determinism by seed, the top-k, top-p and min-p
// cuts, masked (-infinity) logits never drawn, the frequencies of plain
// temperature sampling against softmax, and its draws against a scan of the
// weights in id order.
#include "runtime/sampling.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <numeric>
#include <random>
#include <set>
#include <vector>

#include "runtime/math.h"

namespace sb {
namespace {

std::vector<float> random_logits(size_t n, uint32_t seed, float scale = 3.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

std::vector<int32_t> draw(const SamplerConfig& c, const std::vector<float>& logits, int n) {
  Sampler s(c);
  std::vector<int32_t> out;
  for (int i = 0; i < n; ++i) out.push_back(s.sample(logits));
  return out;
}

// Ids by logit, best first, ties to the lower id.
std::vector<int32_t> ranked(const std::vector<float>& logits) {
  std::vector<int32_t> ids(logits.size());
  std::iota(ids.begin(), ids.end(), 0);
  std::stable_sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
  return ids;
}

TEST(Sampler, GreedyTakesTheLowestIdAmongEqualMaxima) {
  const std::vector<float> logits = {1.0f, 5.0f, -2.0f, 5.0f, 4.9f};
  SamplerConfig c;
  EXPECT_EQ(draw(c, logits, 3), (std::vector<int32_t>{1, 1, 1}));
  c.temperature = 0.8f;
  c.top_k = 1;
  EXPECT_EQ(draw(c, logits, 3), (std::vector<int32_t>{1, 1, 1}));
}

// Greedy against the plain scan it replaces, on lengths around the vector
// and block sizes, with ties, NaNs (never taken; a NaN first element is never
// beaten), infinities and signed zeros.
TEST(Sampler, GreedyIsTheFirstLargestAsAPlainScanFindsIt) {
  auto scan = [](const std::vector<float>& v) {
    int32_t best = 0;
    for (size_t i = 1; i < v.size(); ++i)
      if (v[i] > v[static_cast<size_t>(best)]) best = static_cast<int32_t>(i);
    return best;
  };
  std::mt19937 rng(7);
  const float nan = std::nanf(""), inf = INFINITY;
  int checked = 0;
  for (size_t n : {size_t{1}, size_t{2}, size_t{15}, size_t{16}, size_t{17}, size_t{255}, size_t{256}, size_t{257},
                   size_t{1000}, size_t{4099}, size_t{248077}})
    for (int rep = 0; rep < 40; ++rep) {
      std::vector<float> v = random_logits(n, static_cast<uint32_t>(rng()));
      if (rep % 4 == 1)  // few distinct values: many ties, zeros of both signs
        for (float& x : v) x = static_cast<float>(static_cast<int>(rng() % 5) - 2) * ((rng() & 1) ? 0.0f : 1.0f) * ((rng() & 1) ? -1.0f : 1.0f);
      if (rep % 4 == 2)
        for (int k = 0; k < 5; ++k) v[rng() % n] = (k % 2) ? nan : (k == 0 ? inf : -inf);
      if (rep % 8 == 3) v[0] = nan;
      if (rep % 8 == 7) std::fill(v.begin(), v.end(), nan);
      EXPECT_EQ(draw(SamplerConfig{}, v, 1)[0], scan(v)) << "n " << n << " rep " << rep;
      ++checked;
    }
  EXPECT_EQ(checked, 11 * 40);
}

TEST(Sampler, MinPKeepsOnlyTokensNearTheBestAndMaskedTokensAreNeverDrawn) {
  auto logits = random_logits(2000, 5, 2.0f);
  SamplerConfig c;
  c.temperature = 1.0f;
  c.min_p = 0.2f;
  c.seed = 3;
  const float best = *std::max_element(logits.begin(), logits.end());
  for (int32_t t : draw(c, logits, 500))  // p >= 0.2 p_max: logit >= best + ln 0.2
    EXPECT_GE(logits[static_cast<size_t>(t)], best + std::log(0.2f) - 1e-5f);
  // Everything but three ids masked: only those are drawn, by their weights.
  std::vector<float> masked(2000, -INFINITY);
  masked[7] = 0.0f;
  masked[900] = 1.0f;
  masked[1999] = -1.0f;
  c.min_p = 0.0f;
  std::set<int32_t> seen;
  for (int32_t t : draw(c, masked, 300)) seen.insert(t);
  EXPECT_EQ(seen, (std::set<int32_t>{7, 900, 1999}));
  c.top_p = 0.5f;
  c.top_k = 2;
  for (int32_t t : draw(c, masked, 50)) EXPECT_EQ(t, 900);
}

TEST(Sampler, TheSameSeedGivesTheSameTokensAndAnotherSeedOthers) {
  const auto logits = random_logits(5000, 1, 1.0f);
  for (const auto& [k, p] : std::vector<std::pair<int, float>>{{0, 1.0f}, {40, 1.0f}, {0, 0.9f}, {50, 0.7f}}) {
    SamplerConfig c;
    c.temperature = 1.0f;
    c.top_k = k;
    c.top_p = p;
    c.seed = 42;
    const auto a = draw(c, logits, 200), b = draw(c, logits, 200);
    EXPECT_EQ(a, b) << "top_k " << k << " top_p " << p;
    c.seed = 43;
    EXPECT_NE(a, draw(c, logits, 200)) << "top_k " << k << " top_p " << p;
  }
}

TEST(Sampler, TopKDrawsOnlyFromTheKBest) {
  const auto logits = random_logits(3000, 2, 1.0f);
  const auto order = ranked(logits);
  SamplerConfig c;
  c.temperature = 2.0f;
  c.top_k = 7;
  const std::set<int32_t> best(order.begin(), order.begin() + 7);
  std::set<int32_t> seen;
  for (int32_t t : draw(c, logits, 3000)) {
    EXPECT_TRUE(best.count(t)) << t;
    seen.insert(t);
  }
  EXPECT_EQ(seen.size(), 7u);  // flat enough at temperature 2 that all seven show up
}

TEST(Sampler, TopPDrawsOnlyFromTheSmallestSetHoldingThatMass) {
  // Flat enough logits that the nucleus spans more than the first sorted
  // prefix of 256 candidates.
  const auto logits = random_logits(4000, 3, 0.5f);
  const auto order = ranked(logits);
  for (const float top_p : {0.05f, 0.5f, 0.95f}) {
    std::vector<double> w(order.size());
    double total = 0.0;
    for (size_t i = 0; i < order.size(); ++i) total += w[i] = std::exp(logits[order[i]] - logits[order[0]]);
    size_t nucleus = 0;
    double mass = 0.0;
    while (mass < top_p * total) mass += w[nucleus++];
    SamplerConfig c;
    c.temperature = 1.0f;
    c.top_p = top_p;
    c.seed = 5;
    std::map<int32_t, size_t> rank_of;
    for (size_t i = 0; i < order.size(); ++i) rank_of[order[i]] = i;
    size_t deepest = 0;
    for (int32_t t : draw(c, logits, 600)) deepest = std::max(deepest, rank_of[t]);
    EXPECT_LT(deepest, nucleus) << "top_p " << top_p;
    if (top_p > 0.9f) {
      EXPECT_GT(nucleus, 256u);
      EXPECT_GT(deepest, nucleus / 2) << "the draws reach deep into the nucleus";
    }
  }
}

TEST(Sampler, PlainTemperatureSamplingFollowsTheSoftmax) {
  const std::vector<float> logits = {2.0f, 1.0f, 0.0f, -1.0f, 1.5f};
  SamplerConfig c;
  c.temperature = 0.7f;
  c.seed = 9;
  const int n = 20000;
  std::vector<int> count(logits.size());
  for (int32_t t : draw(c, logits, n)) ++count[static_cast<size_t>(t)];
  double total = 0.0;
  for (float l : logits) total += std::exp(l / 0.7);
  for (size_t i = 0; i < logits.size(); ++i) {
    const double expected = std::exp(logits[i] / 0.7) / total;
    EXPECT_NEAR(static_cast<double>(count[i]) / n, expected, 0.015) << "id " << i;
  }
}

// best_ids against a stable sort of the whole row: rows with many equal
// logits (ties to the lower id), -infinity (masked) entries, k of 0, 1, 20
// and beyond the row, and the largest logits first, last or spread.
TEST(BestIds, AreTheFirstKOfTheRowRankedBestFirstTiesToTheLowerId) {
  std::vector<std::vector<float>> rows = {random_logits(5003, 3), random_logits(2048, 4)};
  for (auto& x : rows[1]) x = std::round(x);  // a few values, many ties
  std::vector<float> masked = random_logits(3001, 5);
  for (size_t i = 0; i < masked.size(); i += 3) masked[i] = -std::numeric_limits<float>::infinity();
  rows.push_back(masked);
  std::vector<float> rising(1000), falling(1000);
  std::iota(rising.begin(), rising.end(), 0.0f);
  std::iota(falling.rbegin(), falling.rend(), 0.0f);
  rows.push_back(rising);
  rows.push_back(falling);
  for (size_t r = 0; r < rows.size(); ++r) {
    const std::vector<int32_t> all = ranked(rows[r]);
    for (size_t k : {size_t{0}, size_t{1}, size_t{20}, size_t{999}, rows[r].size() + 5}) {
      const std::vector<int32_t> want(all.begin(), all.begin() + static_cast<ptrdiff_t>(std::min(k, all.size())));
      EXPECT_EQ(best_ids(rows[r], k), want) << "row " << r << " k " << k;
    }
  }
}

// Plain temperature sampling draws the token a scan of the cumulative
// weights e^((logit - max) / T), each by exp_d and summed one id after
// another in id order, reaches at u times their total (u the request's
// stream: splitmix64 of seed and counter, one a draw). The sampler weighs the
// whole row in one vectorized pass; its draws must stay this scan's. On a
// real model's vocabulary with a tail that is not a whole vector, with ids
// whose weights underflow to zero.
TEST(Sampler, TemperatureDrawsAreTheScanOfWeightsSummedInIdOrder) {
  std::vector<float> logits = random_logits(248320 + 3, 21);
  for (size_t i = 0; i < logits.size(); i += 97) logits[i] = -1000.0f;
  SamplerConfig c;
  c.temperature = 0.8f;
  c.seed = 5;
  const std::vector<int32_t> got = draw(c, logits, 40);
  const int32_t best = argmax(logits);
  const double inv_t = 1.0 / c.temperature, mx = logits[static_cast<size_t>(best)];
  std::vector<double> w(logits.size());
  double total = 0.0;
  for (size_t i = 0; i < logits.size(); ++i) total += w[i] = exp_d((logits[i] - mx) * inv_t);
  for (uint64_t k = 0; k < got.size(); ++k) {
    const double u = static_cast<double>(splitmix64(c.seed ^ splitmix64(k)) >> 11) * (1.0 / 9007199254740992.0);
    double acc = 0.0;
    size_t want = 0;
    while (want + 1 < w.size() && !(u * total < (acc += w[want]))) ++want;
    EXPECT_EQ(got[k], static_cast<int32_t>(want)) << "draw " << k;
  }
}

// The normaliser against a double-precision sum, on a vocabulary of a real
// model's size with a tail that is not a whole vector, and on rows whose
// terms underflow.
TEST(LogProbs, NormaliserAgreesWithADoubleSumAndProbabilitiesSumToOne) {
  for (size_t n : {size_t{1}, size_t{17}, size_t{1000}, size_t{248077}}) {
    for (float scale : {0.5f, 3.0f, 40.0f}) {
      const auto logits = random_logits(n, static_cast<uint32_t>(n) + 7, scale);
      const double mx = *std::max_element(logits.begin(), logits.end());
      double sum = 0.0;
      for (float x : logits) sum += std::exp(static_cast<double>(x) - mx);
      const double want = mx + std::log(sum), got = log_normaliser(logits);
      EXPECT_NEAR(got, want, 4e-7 * std::max(1.0, std::fabs(want))) << n << " logits, scale " << scale;
      double mass = 0.0;
      for (size_t i = 0; i < n; ++i) mass += std::exp(static_cast<double>(logprob(logits, i, got)));
      EXPECT_NEAR(mass, 1.0, 1e-5) << n << " logits, scale " << scale;
      EXPECT_EQ(log_normaliser(logits), got) << "the same logits, the same bits";
    }
  }
  EXPECT_EQ(logprob(std::vector<float>{2.0f}, 0, log_normaliser(std::vector<float>{2.0f})), 0.0f);
}

// logit_stats is argmax and log_normaliser in one, bit for bit, and the
// sampler given it draws what it draws without: on ties (the lower id), a
// NaN, masked logits, and terms that underflow.
TEST(LogProbs, StatsAreTheArgmaxAndNormaliserOfTheRow) {
  std::vector<std::vector<float>> rows;
  for (float scale : {0.5f, 3.0f, 40.0f}) rows.push_back(random_logits(248077, 11, scale));
  rows.push_back({1.0f, 3.0f, 3.0f, -2.0f});
  rows.push_back({1.0f, NAN, 5.0f, 5.0f, 0.5f});
  rows.push_back({NAN, 2.0f, 1.0f});
  rows.push_back({-INFINITY, -1.0f, -INFINITY, -1.0f});
  std::vector<float> steep(1000, -95.0f);  // e^-95 is below the normal range
  steep[500] = 0.0f;
  rows.push_back(steep);
  for (size_t r = 0; r < rows.size(); ++r) {
    const LogitStats s = logit_stats(rows[r]);
    EXPECT_EQ(s.argmax, argmax(rows[r])) << "row " << r;
    const double want = log_normaliser(rows[r]);
    EXPECT_EQ(std::memcmp(&s.log_norm, &want, sizeof want), 0) << "row " << r;
    for (const SamplerConfig& c : {SamplerConfig{}, SamplerConfig{0.8f, 0.9f, 40, 5}, SamplerConfig{1.0f, 1.0f, 0, 6}}) {
      Sampler with(c), without(c);
      for (int i = 0; i < 5; ++i) EXPECT_EQ(with.sample(rows[r], &s), without.sample(rows[r])) << "row " << r;
    }
  }
  EXPECT_EQ(logit_stats(std::vector<float>{1.0f, 3.0f, 3.0f}).argmax, 1);
  EXPECT_EQ(argmax(std::vector<float>{NAN, 2.0f}), 0);
}

}  // namespace
}  // namespace sb
