// The small steps between a layer's big kernels: residual adds, gates, the
// delta rule's L2 norm and gates, MoE routing, the sparse indexer's scores.
// Each output element is one fixed sequence of operations on its own inputs,
// so the per-element steps run large inputs in ranges on the pool
// (for_ranges) and small ones on the calling thread.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "runtime/cpu/activations.h"
#include "runtime/cpu/cpu_kernels.h"
#include "runtime/cpu/float_mode.h"
#include "runtime/cpu/simd.h"
#include "runtime/math.h"

namespace sb::cpu {

void CpuKernels::add(float* x, const float* y, int64_t n) {
  FlushSubnormals mode;
  for_ranges(n, 1, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) x[i] += y[i];
  });
}

void CpuKernels::mul_activation(float* x, const float* gate, int64_t n, Activation act) {
  FlushSubnormals mode;
  for_ranges(n, act == Activation::kIdentity ? 1 : 16, [&](int64_t i0, int64_t i1) {
    int64_t i = i0;
    for (; i + 16 <= i1; i += 16) (V16::load(x + i) * activate(act, V16::load(gate + i))).store(x + i);
    for (; i < i1; ++i) x[i] *= activate(act, gate[i]);
  });
}

void CpuKernels::add_scaled_rows(float* out, const float* y, int64_t ld_y, const float* scale, int64_t scale_stride,
                                 int64_t rows, int64_t dim, Activation act) {
  FlushSubnormals mode;
  for_ranges(rows, dim, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float s = activate(act, scale[r * scale_stride]);
      const float* yr = y + r * ld_y;
      float* o = out + r * dim;
      for (int64_t i = 0; i < dim; ++i) o[i] += s * yr[i];
    }
  });
}

void CpuKernels::l2_normalise(float* x, int64_t rows, int64_t dim, float scale) {
  FlushSubnormals mode;
  // A row's sum of squares is one chain of fmas in ascending order, as long
  // as the row: eight rows' chains run side by side, or the fma's latency
  // sets the pace.
  constexpr int64_t kSide = 8;
  auto scale_row = [&](float* v, float ss) {
    const float inv = 1.0f / std::sqrt(ss + 1e-6f);
    for (int64_t i = 0; i < dim; ++i) v[i] = (v[i] * inv) * scale;
  };
  for_ranges(rows, dim, [&](int64_t r0, int64_t r1) {
    int64_t r = r0;
    for (; r + kSide <= r1; r += kSide) {
      float* v = x + r * dim;
      float ss[kSide] = {};
      for (int64_t i = 0; i < dim; ++i)
        for (int64_t j = 0; j < kSide; ++j) ss[j] = std::fma(v[j * dim + i], v[j * dim + i], ss[j]);
      for (int64_t j = 0; j < kSide; ++j) scale_row(v + j * dim, ss[j]);
    }
    for (; r < r1; ++r) {
      float* v = x + r * dim;
      float ss = 0.0f;
      for (int64_t i = 0; i < dim; ++i) ss = std::fma(v[i], v[i], ss);
      scale_row(v, ss);
    }
  });
}

void CpuKernels::delta_gates(const float* b, const float* a, int64_t rows, int64_t heads, const float* neg_exp_a,
                             const float* dt_bias, float* beta, float* g) {
  FlushSubnormals mode;
  // A prefill's 512 rows in ranges on the pool: on the calling thread alone
  // they were 0.3% of a 1-thread step's samples, left to one thread at 2.
  for_ranges(rows, heads * 32, [&](int64_t r0, int64_t r1) {
    for (int64_t t = r0; t < r1; ++t)
      for (int64_t h = 0; h < heads; ++h) {
        beta[t * heads + h] = sigmoid(b[t * heads + h]);
        g[t * heads + h] = neg_exp_a[h] * softplus(a[t * heads + h] + dt_bias[h]);
      }
  });
}

void CpuKernels::mean_rows(const float* x, int64_t rows, int64_t dim, float* out) {
  FlushSubnormals mode;
  std::fill(out, out + dim, 0.0f);
  for (int64_t s = 0; s < rows; ++s)
    for (int64_t i = 0; i < dim; ++i) out[i] += x[s * dim + i];
  for (int64_t i = 0; i < dim; ++i) out[i] /= static_cast<float>(rows);
}

void CpuKernels::top_k(const float* scores, int64_t n, int64_t k, int64_t* out) {
  std::vector<int64_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int64_t a, int64_t b) {
    return scores[a] > scores[b] || (scores[a] == scores[b] && a < b);
  });
  std::copy_n(order.begin(), k, out);
}

void CpuKernels::route(const float* logits, int64_t rows, int64_t n_experts, int64_t top_k_count, bool renormalise,
                       int64_t* chosen, float* weights) {
  FlushSubnormals mode;
  std::vector<float> p(n_experts);
  for (int64_t t = 0; t < rows; ++t) {
    const float* l = logits + t * n_experts;
    const float mx = *std::max_element(l, l + n_experts);
    float sum = 0.0f;
    for (int64_t e = 0; e < n_experts; ++e) sum += p[e] = exp_f(l[e] - mx);
    for (int64_t e = 0; e < n_experts; ++e) p[e] /= sum;
    int64_t* c = chosen + t * top_k_count;
    top_k(p.data(), n_experts, top_k_count, c);
    float picked = 0.0f;
    for (int64_t i = 0; i < top_k_count; ++i) picked += p[c[i]];
    for (int64_t i = 0; i < top_k_count; ++i) weights[t * top_k_count + i] = renormalise ? p[c[i]] / picked : p[c[i]];
  }
}

void CpuKernels::index_scores(const float* q, const float* w, int64_t heads, int64_t dim, const float* pooled,
                              int64_t blocks, float s_scale, float* scores) {
  FlushSubnormals mode;
  for (int64_t b = 0; b < blocks; ++b) {
    float score = 0.0f;
    for (int64_t h = 0; h < heads; ++h) {
      float qk = 0.0f;
      const float* qh = q + h * dim;
      for (int64_t i = 0; i < dim; ++i) qk = std::fma(qh[i], pooled[b * dim + i], qk);
      score = std::fma(w[h], std::max(qk, 0.0f), score);
    }
    scores[b] = score * s_scale;
  }
}

void CpuKernels::sparse_block_mask(const BlockMaskInput& in, uint8_t* mask) {
  const int64_t stride = in.stride(), m = in.block;
  std::fill(mask, mask + in.rows * stride, uint8_t{0});
  std::vector<float> scores;
  std::vector<int64_t> top(static_cast<size_t>(in.top_k));
  for (int64_t r = 0; r < in.rows; ++r) {
    const int64_t t = in.first_pos + r;
    const int64_t closed = (t + 1) / m;
    uint8_t* row = mask + r * stride;
    if (closed <= in.top_k) {
      std::fill(row, row + closed, uint8_t{1});
    } else {
      scores.resize(static_cast<size_t>(closed));
      index_scores(in.q + r * in.heads * in.dim, in.w + r * in.heads, in.heads, in.dim, in.pooled, closed, in.s_scale,
                   scores.data());
      top_k(scores.data(), closed, in.top_k, top.data());
      for (int64_t b : top) row[b] = 1;
    }
    if (closed * m <= t) row[t / m] = 1;  // the query's own open block
  }
}

}  // namespace sb::cpu
