// argmax and logit_stats (runtime/sampling.h): the sampler's reads of a
// whole vocabulary, in the CPU kernels' vector code and float mode, so the
// sampler (runtime/sampling.cpp) and Kernels::logit_stats give the same bits.
#include <algorithm>
#include <cmath>

#include "runtime/cpu/float_mode.h"
#include "runtime/cpu/simd.h"
#include "runtime/math.h"
#include "runtime/sampling.h"

namespace sb {

// A whole vocabulary per token, so the value comes from vector lanes by
// blocks (max keeps its second operand when the first is NaN, on every
// backend), and only the block where the maximum first appears is scanned
// for its index.
int32_t argmax(std::span<const float> logits) {
  const size_t n = logits.size();
  if (n == 0 || std::isnan(logits[0])) return 0;
  constexpr size_t kBlock = 256;
  float best = logits[0];
  size_t best_block = 0;
  for (size_t b = 0; b < n; b += kBlock) {
    const size_t end = std::min(n, b + kBlock);
    size_t i = b;
    float m = best;
    if (end - b >= 16) {
      cpu::V16 acc = cpu::V16::set1(best);
      for (; i + 16 <= end; i += 16) acc = max(cpu::V16::load(logits.data() + i), acc);
      alignas(64) float lanes[16];
      acc.store(lanes);
      for (float x : lanes) m = x > m ? x : m;
    }
    for (; i < end; ++i) m = logits[i] > m ? logits[i] : m;
    if (m > best) best = m, best_block = b;
  }
  size_t i = best_block;
  while (!(logits[i] == best)) ++i;
  return static_cast<int32_t>(i);
}

LogitStats logit_stats(std::span<const float> logits) {
  if (logits.empty()) return {0, -INFINITY};
  const int32_t best = argmax(logits);
  // log sum e^(logit - mx) + mx, mx the logit argmax picks, in the kernels'
  // float mode: the same bits on the pool's threads and elsewhere.
  cpu::FlushSubnormals mode;
  const float mx = logits[static_cast<size_t>(best)];
  const cpu::V16 vmx = cpu::V16::set1(mx);
  constexpr size_t kBlock = 1024;
  double sum = 0.0;
  size_t i = 0;
  for (; i + 16 <= logits.size();) {
    cpu::V16 acc = cpu::V16::zero();
    for (const size_t end = std::min(logits.size(), i + kBlock); i + 16 <= end; i += 16)
      acc = acc + cpu::vexp(cpu::V16::load(logits.data() + i) - vmx);
    sum += static_cast<double>(cpu::hsum(acc));
  }
  for (; i < logits.size(); ++i) sum += static_cast<double>(exp_f(logits[i] - mx));
  return {best, static_cast<double>(mx) + log_d(sum)};
}

}  // namespace sb
