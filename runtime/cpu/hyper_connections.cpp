// Hyper-connections (qwen4exp; docs/model-spec.md section 7.3): the grouped
// RMSNorm of the streams, the mixer's gate, the weighted mean of the streams
// that is a layer's input, and the layer's output added back to each stream.
// Each output element is one fixed sequence of operations on its own row.
#include <algorithm>
#include <cmath>

#include "runtime/cpu/activations.h"
#include "runtime/cpu/cpu_kernels.h"
#include "runtime/cpu/float_mode.h"
#include "runtime/cpu/simd.h"

namespace sb::cpu {

void CpuKernels::rms_norm_groups(const float* x, int64_t rows, int64_t groups, int64_t dim, const float* w, float eps,
                                 bool offset, float* y) {
  // Group g of row r is row r * groups + g of a plain RMSNorm, with its own weights.
  for (int64_t g = 0; g < groups; ++g) {
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t at = (r * groups + g) * dim;
      rms_norm(x + at, 1, dim, w + g * dim, eps, offset, y + at);
    }
  }
}

void CpuKernels::scale_activation(float* x, int64_t n, float scale, Activation act) {
  FlushSubnormals mode;
  for_ranges(n, 16, [&](int64_t i0, int64_t i1) {
    int64_t i = i0;
    const V16 s = V16::set1(scale);
    for (; i + 16 <= i1; i += 16) activate(act, V16::load(x + i) * s).store(x + i);
    for (; i < i1; ++i) x[i] = activate(act, x[i] * scale);
  });
}

void CpuKernels::hc_mix(const float* mix, const float* normed, int64_t rows, int64_t streams, int64_t dim,
                        float* out) {
  FlushSubnormals mode;
  const float n = static_cast<float>(streams);
  for_ranges(rows, streams * dim * 8, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      float* o = out + r * dim;
      std::fill(o, o + dim, 0.0f);
      for (int64_t s = 0; s < streams; ++s) {
        const float* m = mix + (r * streams + s) * dim;
        const float* h = normed + (r * streams + s) * dim;
        int64_t i = 0;
        for (; i + 16 <= dim; i += 16)
          (V16::load(o + i) + sigmoid(V16::load(m + i)) * V16::load(h + i)).store(o + i);
        for (; i < dim; ++i) o[i] += sigmoid(m[i]) * h[i];
      }
      for (int64_t i = 0; i < dim; ++i) o[i] /= n;
    }
  });
}

void CpuKernels::hc_inject(float* h, const float* y, const float* inject, int64_t rows, int64_t streams,
                           int64_t dim) {
  FlushSubnormals mode;
  const float n = static_cast<float>(streams);
  for_ranges(rows, streams * dim, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* yr = y + r * dim;
      for (int64_t s = 0; s < streams; ++s) {
        const float j = 2.0f * sigmoid(inject[r * streams + s] / n);
        float* hs = h + (r * streams + s) * dim;
        for (int64_t i = 0; i < dim; ++i) hs[i] += j * yr[i];
      }
    }
  });
}

}  // namespace sb::cpu
