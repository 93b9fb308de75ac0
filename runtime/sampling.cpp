// The sampler. argmax and logit_stats, which run the kernels' vector code,
// are defined with the CPU kernels (runtime/cpu/logits.cpp).
#include "runtime/sampling.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "runtime/math.h"

namespace sb {
namespace {

// e^((logit - mx) * inv_t) of every id, in id order: one pass that the
// compiler vectorizes (exp_d has no branches), the same bits as one id at a
// time. At a 248k vocabulary the scalar pass cost several milliseconds of
// the step thread per token.
std::vector<double> weights_in_id_order(std::span<const float> logits, double mx, double inv_t) {
  std::vector<double> w(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) w[i] = exp_d((logits[i] - mx) * inv_t);
  return w;
}

// Ids by logit, best first, ties to the lower id: a total order, so a
// sampler's candidates are a function of the logits alone.
bool ranks_before(std::span<const float> logits, int32_t a, int32_t b) {
  const float x = logits[static_cast<size_t>(a)], y = logits[static_cast<size_t>(b)];
  return x > y || (x == y && a < b);
}

}  // namespace

std::vector<int32_t> best_ids(std::span<const float> logits, size_t k) {
  k = std::min(k, logits.size());
  std::vector<int32_t> heap;  // the best so far, the worst of them in front
  heap.reserve(k);
  if (k == 0) return heap;
  auto order = [&](int32_t a, int32_t b) { return ranks_before(logits, a, b); };
  for (size_t i = 0; i < k; ++i) {
    heap.push_back(static_cast<int32_t>(i));
    std::push_heap(heap.begin(), heap.end(), order);
  }
  // Every kept id is lower than the next one: only a larger logit beats the worst.
  float worst = logits[static_cast<size_t>(heap.front())];
  for (size_t i = k; i < logits.size(); ++i) {
    if (!(logits[i] > worst)) continue;
    std::pop_heap(heap.begin(), heap.end(), order);
    heap.back() = static_cast<int32_t>(i);
    std::push_heap(heap.begin(), heap.end(), order);
    worst = logits[static_cast<size_t>(heap.front())];
  }
  std::sort_heap(heap.begin(), heap.end(), order);
  return heap;
}

double Sampler::next_uniform() {
  const uint64_t r = splitmix64(config_.seed ^ splitmix64(counter_++));
  return static_cast<double>(r >> 11) * (1.0 / 9007199254740992.0);
}

int32_t Sampler::sample(std::span<const float> logits, const LogitStats* stats) {
  const int32_t best = stats ? stats->argmax : argmax(logits);
  if (greedy()) {
    next_uniform();  // every step draws once, so the stream never depends on the mode of earlier steps
    return best;
  }
  return pick(candidates(logits, best), next_uniform());
}

Sampler::Candidates Sampler::candidates(std::span<const float> logits, int32_t best) const {
  const double inv_t = 1.0 / config_.temperature;
  const double mx = logits[static_cast<size_t>(best)];
  auto weight = [&](int32_t id) { return exp_d((logits[static_cast<size_t>(id)] - mx) * inv_t); };
  const bool top_k = config_.top_k > 0 && static_cast<size_t>(config_.top_k) < logits.size();
  const bool top_p = config_.top_p < 1.0f;

  // Candidates: with neither cut, the whole vocabulary in id order, unsorted
  // (a full sort of a 152k vocabulary per token costs more than the sampling
  // itself); otherwise by logit, ties to the lower id (ranks_before()).
  Candidates c;
  std::vector<int32_t>& ids = c.ids;
  std::vector<double>& p = c.weights;
  if (top_k) {
    ids = best_ids(logits, static_cast<size_t>(config_.top_k));
  } else {
    ids.resize(logits.size());
    std::iota(ids.begin(), ids.end(), 0);
  }
  auto order = [&](int32_t a, int32_t b) { return ranks_before(logits, a, b); };
  // The nucleus needs the mass of the candidates it drops, so top-p alone
  // weighs everything; the best candidates are then sorted in growing
  // prefixes until the nucleus fits in one.
  const size_t pool = ids.size();
  double pool_mass = 0.0;
  // Without top-k every id weighs: all at once, still in id order.
  std::vector<double> all = top_k ? std::vector<double>() : weights_in_id_order(logits, mx, inv_t);
  if (top_p)
    for (size_t i = 0; i < pool; ++i) pool_mass += top_k ? weight(ids[i]) : all[i];
  size_t keep = pool, sorted = top_k ? pool : 0;
  if (top_p) {
    const double want = static_cast<double>(config_.top_p) * pool_mass;
    double mass = 0.0;
    keep = 0;
    for (size_t prefix = std::min<size_t>(256, pool);; prefix = std::min(pool, prefix * 8)) {
      if (sorted < prefix) {
        std::partial_sort(ids.begin() + static_cast<std::ptrdiff_t>(sorted),
                          ids.begin() + static_cast<std::ptrdiff_t>(prefix),
                          ids.begin() + static_cast<std::ptrdiff_t>(pool), order);
        sorted = prefix;
      }
      while (keep < prefix && mass < want) {
        p.push_back(weight(ids[keep++]));
        mass += p.back();
      }
      if (mass >= want || prefix == pool) break;
    }
  } else if (top_k) {
    for (size_t i = 0; i < keep; ++i) p.push_back(weight(ids[i]));
  } else {
    p = std::move(all);
  }
  // min-p: the weights are relative to the most likely token (weight 1).
  if (config_.min_p > 0.0f)
    for (size_t i = 0; i < keep; ++i)
      if (p[i] < static_cast<double>(config_.min_p)) p[i] = 0.0;
  return c;
}

int32_t Sampler::pick(const Candidates& c, double u01) {
  const size_t keep = c.weights.size();
  const std::vector<double>& p = c.weights;
  double total = 0.0;
  for (size_t i = 0; i < keep; ++i) total += p[i];
  const double u = u01 * total;
  double acc = 0.0;
  for (size_t i = 0; i < keep; ++i) {
    acc += p[i];
    if (u < acc) return c.ids[i];
  }
  // Rounding left u at the very top: the last candidate that has weight.
  for (size_t i = keep; i-- > 0;)
    if (p[i] > 0.0) return c.ids[i];
  return c.ids[0];
}

int32_t Sampler::sample_draft(std::span<const float> logits, const LogitStats* stats, const DraftToken& draft) {
  const int32_t best = stats ? stats->argmax : argmax(logits);
  if (greedy()) {
    next_uniform();
    return best;
  }
  Candidates c = candidates(logits, best);
  double total = 0.0;
  for (double w : c.weights) total += w;
  const bool point = draft.probs.empty();
  auto q = [&](int32_t id) {
    if (point) return id == draft.token ? 1.0 : 0.0;
    return static_cast<size_t>(id) < draft.probs.size() ? static_cast<double>(draft.probs[static_cast<size_t>(id)])
                                                        : 0.0;
  };
  double p_draft = 0.0;
  for (size_t i = 0; i < c.weights.size(); ++i)
    if (c.ids[i] == draft.token) p_draft = c.weights[i] / total;
  // Accept with probability min(1, p / q): u * q < p.
  const double q_draft = q(draft.token);
  if (q_draft > 0.0 && next_uniform() * q_draft < p_draft) return draft.token;
  // The residual max(0, p - q): never the draft token once it was rejected
  // (a rejection means p <= q there).
  Candidates residual = c;
  double left = 0.0;
  for (size_t i = 0; i < residual.weights.size(); ++i) {
    double& w = residual.weights[i];
    w = c.ids[i] == draft.token ? 0.0 : std::max(0.0, w / total - q(c.ids[i]));
    left += w;
  }
  // q covered p everywhere but at a rounding's distance: p itself.
  return pick(left > 0.0 ? residual : c, next_uniform());
}

double log_normaliser(std::span<const float> logits) { return logit_stats(logits).log_norm; }

}  // namespace sb
