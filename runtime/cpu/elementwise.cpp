// Per-row and per-element kernels: RMSNorm, RoPE, the causal conv, the logits'
// statistics for sampling. Each row's result depends on that row alone.
#include <algorithm>
#include <cmath>
#include <vector>

#include "runtime/cpu/activations.h"
#include "runtime/cpu/cpu_kernels.h"
#include "runtime/cpu/float_mode.h"
#include "runtime/cpu/logits.h"
#include "runtime/cpu/simd.h"
#include "runtime/math.h"

namespace sb::cpu {

void CpuKernels::for_ranges(int64_t n, int64_t cost, const std::function<void(int64_t, int64_t)>& fn) {
  constexpr int64_t kInline = 1 << 16;  // element operations worth less than a hand-off
  if (n <= 1 || pool_->size() == 1 || n * cost < kInline) return fn(0, n);
  const int64_t pieces = std::min<int64_t>(n, 4 * pool_->size()), per = (n + pieces - 1) / pieces;
  pool_->parallel_for((n + per - 1) / per, [&](int64_t p) { fn(p * per, std::min(n, (p + 1) * per)); });
}

void CpuKernels::rms_norm(const float* x, int64_t rows, int64_t dim, const float* w, float eps, bool offset,
                          float* y) {
  FlushSubnormals mode;
  for_ranges(rows, dim, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* xr = x + r * dim;
      float* yr = y + r * dim;
      const float mean_sq = dot(xr, xr, dim) / static_cast<float>(dim);
      const float inv = 1.0f / std::sqrt(mean_sq + eps);
      for (int64_t i = 0; i < dim; ++i) {
        const float scale = offset ? 1.0f + w[i] : w[i];
        yr[i] = (xr[i] * inv) * scale;
      }
    }
  });
}

void CpuKernels::rope(float* x, int64_t rows, int64_t heads, int64_t head_dim, int64_t rot, const int64_t* positions,
                      double theta) {
  FlushSubnormals mode;
  const int64_t half = rot / 2;
  std::vector<float> inv_freq(half);
  // theta^(-2i / rot) = e^(-(2i / rot) ln theta) in double (runtime/math.h), rounded once.
  const double log_theta = log_d(theta);
  for (int64_t i = 0; i < half; ++i)
    inv_freq[i] = static_cast<float>(exp_d(-(static_cast<double>(2 * i) / static_cast<double>(rot)) * log_theta));
  for_ranges(rows, heads * rot + 8 * half, [&](int64_t r0, int64_t r1) {
    std::vector<float> cs(half), sn(half);
    for (int64_t r = r0; r < r1; ++r) {
      const float p = static_cast<float>(positions[r]);
      for (int64_t i = 0; i < half; ++i) {
        const float a = p * inv_freq[i];
        double s, c;
        sincos_d(a, &s, &c);
        cs[i] = static_cast<float>(c);
        sn[i] = static_cast<float>(s);
      }
      for (int64_t h = 0; h < heads; ++h) {
        float* v = x + (r * heads + h) * head_dim;
        for (int64_t i = 0; i < half; ++i) {
          const float a = v[i], b = v[i + half];
          v[i] = a * cs[i] - b * sn[i];
          v[i + half] = b * cs[i] + a * sn[i];
        }
      }
    }
  });
}

namespace {

// Output rows [0, rows) of the channels [c, c + 16 NV) of one sequence, in
// rows x; in(i) is row i of [state | x]; o is channel c's output in row 0,
// rows ld apart. Rows run inside a strip of channels: the strip's last
// kernel input rows stay in L1 for the next row, and each new input row is
// read once. Across a range of channels a row at a time, every output row
// read kernel input rows afresh (3 KiB pieces 24 KiB apart at the 0.8b
// shapes): a quarter slower (docs/kernels.md).
// A prefill's input rows are `channels` floats apart (24 KiB at the 0.8b
// shapes), too far for the hardware prefetcher: each row's new input piece
// came from memory while the strip waited on it (60% of the conv's samples
// on its loads); it is fetched kConvRowsAhead rows ahead.
template <int NV, class In>
void conv_strip(const In& in, int64_t rows, int64_t channels, const float* weight, int64_t kernel, int64_t c, float* o,
                int64_t ld) {
  constexpr int64_t kConvRowsAhead = 8;
  for (int64_t s = 0; s < rows; ++s) {
    if (s + kConvRowsAhead < rows)
      for (int v = 0; v < NV; ++v) __builtin_prefetch(in(s + kConvRowsAhead + kernel - 1) + c + 16 * v);
    V16 acc[NV];
    for (int v = 0; v < NV; ++v) acc[v] = V16::zero();
    for (int64_t j = 0; j < kernel; ++j) {
      const float* x = in(s + j) + c;
      const float* w = weight + j * channels + c;
      for (int v = 0; v < NV; ++v) acc[v] = fma(V16::load(w + 16 * v), V16::load(x + 16 * v), acc[v]);
    }
    for (int v = 0; v < NV; ++v) silu(acc[v]).store(o + s * ld + 16 * v);
  }
}

// Channels [lo, hi) of one sequence's output rows, o channel lo's in row 0,
// rows ld apart; fetch_ahead(c) before each strip of 64 from c.
template <class In, class Ahead>
void conv_columns(const In& in, int64_t rows, int64_t channels, const float* weight, int64_t kernel, int64_t lo,
                  int64_t hi, float* o, int64_t ld, const Ahead& fetch_ahead) {
  int64_t c = lo;
  for (; c + 64 <= hi; c += 64) {
    fetch_ahead(c);
    conv_strip<4>(in, rows, channels, weight, kernel, c, o + (c - lo), ld);
  }
  for (; c + 16 <= hi; c += 16) conv_strip<1>(in, rows, channels, weight, kernel, c, o + (c - lo), ld);
  for (; c < hi; ++c)
    for (int64_t s = 0; s < rows; ++s) {
      float acc = 0.0f;
      for (int64_t j = 0; j < kernel; ++j) acc = std::fma(weight[j * channels + c], in(s + j)[c], acc);
      o[s * ld + (c - lo)] = silu(acc);
    }
}

}  // namespace

// How far ahead (floats) causal_conv_silu fetches each state row.
constexpr int64_t kConvAhead = 512;

void CpuKernels::causal_conv_silu(const float* x, int64_t t, int64_t channels, const float* weight, int64_t kernel,
                                  float* const* states, int64_t sequences, std::span<const RowPart> out) {
  FlushSubnormals mode;
  const int64_t hist = kernel - 1, rows = t / sequences;
  // Channels never mix, so each range of them is a whole computation: its
  // outputs for every row, then its columns of each state moved on.
  auto run = [&](int64_t q0, int64_t q1, int64_t c0, int64_t c1) {
    for (int64_t q = q0; q < q1; ++q) {
      float* state = states[q];
      const float* xq = x + q * rows * channels;
      // Input row i of [state | x rows]: a state row below hist.
      auto in = [&](int64_t i) { return i < hist ? state + i * channels : xq + (i - hist) * channels; };
      // The state's rows come from memory (a decode step's states far
      // exceed the caches), three streams far apart that the hardware
      // prefetcher picks up late: each is fetched kConvAhead ahead.
      // Past the end of this state's channels, the next state's first.
      auto fetch_ahead = [&](int64_t c) {
        const int64_t ahead = c + kConvAhead;
        const float* p = nullptr;
        if (ahead + 64 <= c1)
          p = state + ahead;
        else if (q + 1 < q1)
          p = states[q + 1] + c0 + std::max<int64_t>(0, ahead - c1);
        if (p)
          for (int64_t i = 0; i < hist; ++i)
            for (int64_t l = 0; l < 64; l += 16) __builtin_prefetch(p + i * channels + l, 1);
      };
      int64_t p0 = 0;  // the part's first channel
      for (const RowPart& part : out) {
        const int64_t lo = std::max(c0, p0), hi = std::min(c1, p0 + part.width);
        if (lo < hi)
          conv_columns(in, rows, channels, weight, kernel, lo, hi, part.out + q * rows * part.ld + (lo - p0),
                       part.ld, fetch_ahead);
        p0 += part.width;
      }
      // The state becomes the last hist input rows; ascending rows read
      // only rows at or above the one they write.
      for (int64_t i = 0; i < hist; ++i) std::copy(in(rows + i) + c0, in(rows + i) + c1, state + i * channels + c0);
    }
  };
  // Several sequences (a decode step): a thread takes whole sequences, so
  // that it reads each state as one stream; ranges of channels across all
  // states read short pieces of rows far apart (3 KB pieces 24 KB apart at
  // the 0.8b shapes), each a cold start for the prefetcher. One sequence's
  // prefill: ranges of channels.
  if (sequences > 1)
    for_ranges(sequences, rows * channels * (kernel + 8), [&](int64_t q0, int64_t q1) { run(q0, q1, 0, channels); });
  else
    for_ranges(channels, t * (kernel + 8), [&](int64_t c0, int64_t c1) { run(0, 1, c0, c1); });
}

void CpuKernels::logit_stats(const float* logits, int64_t rows, int64_t vocab, LogitStats* out) {
  // Fewer rows than threads (a decode step's one row): each row's passes in
  // blocks across the pool, not a whole vocabulary on one thread while the
  // others wait.
  if (rows < pool_->size()) {
    const BlockRanges ranges = [&](int64_t n, const std::function<void(int64_t, int64_t)>& fn) {
      for_ranges(n, vocab / std::max<int64_t>(n, 1) + 1, fn);
    };
    for (int64_t r = 0; r < rows; ++r) out[r] = cpu::logit_stats(std::span<const float>(logits + r * vocab, vocab), ranges);
    return;
  }
  for_ranges(rows, vocab, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) out[r] = sb::logit_stats(std::span<const float>(logits + r * vocab, vocab));
  });
}

}  // namespace sb::cpu
