// argmax and logit_stats (runtime/sampling.h): the sampler's reads of a
// whole vocabulary, in the CPU kernels' vector code and float mode, so the
// sampler (runtime/sampling.cpp) and Kernels::logit_stats give the same bits.
#include "runtime/cpu/logits.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "runtime/cpu/float_mode.h"
#include "runtime/cpu/simd.h"
#include "runtime/math.h"

namespace sb::cpu {
namespace {

constexpr size_t kMaxBlock = 256;   // logits per block of argmax's pass
constexpr size_t kSumBlock = 1024;  // logits per block of the normaliser's pass, a float sum each

// The largest of seed (not NaN) and the logits of [b, e) that are not NaN
// (max keeps its second operand when the first is NaN, on every backend).
float block_max(const float* x, size_t b, size_t e, float seed) {
  size_t i = b;
  float m = seed;
  if (e - b >= 16) {
    V16 acc = V16::set1(seed);
    for (; i + 16 <= e; i += 16) acc = max(V16::load(x + i), acc);
    alignas(64) float lanes[16];
    acc.store(lanes);
    for (float v : lanes) m = v > m ? v : m;
  }
  for (; i < e; ++i) m = x[i] > m ? x[i] : m;
  return m;
}

// The first index of the largest logit that is not NaN, given every block's
// maximum seeded with logits[0]: only the block where that value first
// appears is scanned.
int32_t first_of_largest(std::span<const float> logits, std::span<const float> maxima) {
  float best = logits[0];
  size_t best_block = 0;
  for (size_t b = 0; b < maxima.size(); ++b)
    if (maxima[b] > best) best = maxima[b], best_block = b;
  size_t i = best_block * kMaxBlock;
  while (!(logits[i] == best)) ++i;
  return static_cast<int32_t>(i);
}

int32_t argmax_blocks(std::span<const float> logits, const BlockRanges& ranges) {
  const size_t n = logits.size();
  if (n == 0 || std::isnan(logits[0])) return 0;
  std::vector<float> maxima((n + kMaxBlock - 1) / kMaxBlock);
  ranges(static_cast<int64_t>(maxima.size()), [&](int64_t b0, int64_t b1) {
    for (auto b = static_cast<size_t>(b0); b < static_cast<size_t>(b1); ++b)
      maxima[b] = block_max(logits.data(), b * kMaxBlock, std::min(n, (b + 1) * kMaxBlock), logits[0]);
  });
  return first_of_largest(logits, maxima);
}

// sum e^(logit - mx): 16 lanes over each block of whole vectors, the
// blocks' float sums added in double in block order, then the last n % 16
// logits one by one.
double exp_sum(std::span<const float> logits, float mx, const BlockRanges& ranges) {
  const size_t n = logits.size(), vector_end = n - n % 16;
  std::vector<float> sums((vector_end + kSumBlock - 1) / kSumBlock);
  const V16 vmx = V16::set1(mx);
  ranges(static_cast<int64_t>(sums.size()), [&](int64_t b0, int64_t b1) {
    for (auto b = static_cast<size_t>(b0); b < static_cast<size_t>(b1); ++b) {
      V16 acc = V16::zero();
      for (size_t i = b * kSumBlock, end = std::min(vector_end, i + kSumBlock); i < end; i += 16)
        acc = acc + vexp(V16::load(logits.data() + i) - vmx);
      sums[b] = hsum(acc);
    }
  });
  double sum = 0.0;
  for (float s : sums) sum += static_cast<double>(s);
  for (size_t i = vector_end; i < n; ++i) sum += static_cast<double>(exp_f(logits[i] - mx));
  return sum;
}

void inline_ranges(int64_t n, const std::function<void(int64_t, int64_t)>& fn) { fn(0, n); }

}  // namespace

LogitStats logit_stats(std::span<const float> logits, const BlockRanges& ranges) {
  if (logits.empty()) return {0, -INFINITY};
  // The pool's workers run in this float mode for their whole life.
  FlushSubnormals mode;
  const int32_t best = argmax_blocks(logits, ranges);
  // log sum e^(logit - mx) + mx, mx the logit argmax picks.
  const float mx = logits[static_cast<size_t>(best)];
  return {best, static_cast<double>(mx) + log_d(exp_sum(logits, mx, ranges))};
}

}  // namespace sb::cpu

namespace sb {

int32_t argmax(std::span<const float> logits) { return cpu::argmax_blocks(logits, cpu::inline_ranges); }

LogitStats logit_stats(std::span<const float> logits) { return cpu::logit_stats(logits, cpu::inline_ranges); }

}  // namespace sb
