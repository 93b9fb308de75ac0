#include "runtime/sampling.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace sb {
namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

int32_t argmax(std::span<const float> logits) {
  int32_t best = 0;
  for (size_t i = 1; i < logits.size(); ++i)
    if (logits[i] > logits[best]) best = static_cast<int32_t>(i);
  return best;
}

}  // namespace

double Sampler::next_uniform() {
  const uint64_t r = splitmix64(config_.seed ^ splitmix64(counter_++));
  return static_cast<double>(r >> 11) * (1.0 / 9007199254740992.0);
}

int32_t Sampler::sample(std::span<const float> logits) {
  if (config_.temperature <= 0.0f || config_.top_k == 1) {
    next_uniform();  // every step draws once, so the stream never depends on the mode of earlier steps
    return argmax(logits);
  }
  // Candidates sorted by logit, ties to the lower id: the order is total, so
  // the result is a function of the logits alone.
  std::vector<int32_t> ids(logits.size());
  std::iota(ids.begin(), ids.end(), 0);
  auto better = [&](int32_t a, int32_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); };
  size_t keep = ids.size();
  if (config_.top_k > 0 && static_cast<size_t>(config_.top_k) < keep) keep = config_.top_k;
  std::partial_sort(ids.begin(), ids.begin() + keep, ids.end(), better);
  ids.resize(keep);
  const double inv_t = 1.0 / config_.temperature;
  const double mx = logits[ids[0]];
  std::vector<double> p(keep);
  double total = 0.0;
  for (size_t i = 0; i < keep; ++i) total += p[i] = std::exp((logits[ids[i]] - mx) * inv_t);
  if (config_.top_p < 1.0f) {
    double mass = 0.0;
    size_t n = 0;
    while (n < keep) {
      mass += p[n] / total;
      ++n;
      if (mass >= config_.top_p) break;
    }
    keep = n;
    total = 0.0;
    for (size_t i = 0; i < keep; ++i) total += p[i];
  }
  const double u = next_uniform() * total;
  double acc = 0.0;
  for (size_t i = 0; i < keep; ++i) {
    acc += p[i];
    if (u < acc) return ids[i];
  }
  return ids[keep - 1];
}

std::vector<float> log_softmax(std::span<const float> logits) {
  double mx = -INFINITY;
  for (float v : logits) mx = std::max(mx, static_cast<double>(v));
  double sum = 0.0;
  for (float v : logits) sum += std::exp(static_cast<double>(v) - mx);
  const double lse = mx + std::log(sum);
  std::vector<float> out(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) out[i] = static_cast<float>(static_cast<double>(logits[i]) - lse);
  return out;
}

}  // namespace sb
