// qwen4exp's PLE n-gram layer (docs/model-spec.md section 7.3): the gate of
// the n-gram value per residual stream, and the dilated causal depthwise
// convolution over the gated streams. Each output element is one fixed
// sequence of operations on its own inputs.
#include <algorithm>
#include <cmath>

#include "runtime/cpu/activations.h"
#include "runtime/cpu/cpu_kernels.h"
#include "runtime/cpu/float_mode.h"
#include "runtime/cpu/simd.h"

namespace sb::cpu {

void CpuKernels::ple_gate(const float* key, const float* query, const float* value, int64_t rows, int64_t streams,
                          int64_t dim, float* out) {
  FlushSubnormals mode;
  const float inv_sqrt = 1.0f / std::sqrt(static_cast<float>(dim));
  for_ranges(rows, streams * dim * 2, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r)
      for (int64_t s = 0; s < streams; ++s) {
        const int64_t at = (r * streams + s) * dim;
        const float t = dot(key + at, query + at, dim) * inv_sqrt;
        const float mag = std::sqrt(std::max(std::fabs(t), 1e-6f));
        const float g = sigmoid(t > 0.0f ? mag : t < 0.0f ? -mag : 0.0f);
        for (int64_t i = 0; i < dim; ++i) out[at + i] = g * value[r * dim + i];
      }
  });
}

void CpuKernels::causal_conv_silu_dilated(const float* x, int64_t t, int64_t channels, const float* weight,
                                          int64_t kernel, int64_t dilation, float* state, float* out) {
  FlushSubnormals mode;
  const int64_t hist = (kernel - 1) * dilation;
  // Input row i of [state | x]: a state row below hist.
  auto in = [&](int64_t i) { return i < hist ? state + i * channels : x + (i - hist) * channels; };
  for_ranges(channels, t * (kernel + 8), [&](int64_t c0, int64_t c1) {
    for (int64_t s = 0; s < t; ++s)
      for (int64_t c = c0; c < c1; ++c) {
        float acc = 0.0f;
        for (int64_t j = 0; j < kernel; ++j) acc = std::fma(weight[j * channels + c], in(s + j * dilation)[c], acc);
        out[s * channels + c] = silu(acc);
      }
  });
  // The state becomes the last hist input rows; ascending rows read only
  // rows at or above the one they write.
  for (int64_t i = 0; i < hist; ++i) std::copy(in(t + i), in(t + i) + channels, state + i * channels);
}

}  // namespace sb::cpu
