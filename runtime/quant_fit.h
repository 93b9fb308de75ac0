// The pieces the reference quantizers share (runtime/quant.cpp,
// runtime/quant_lowbit.cpp): ggml's rounding and its scale-and-min fit, kept
// operation for operation so that the same floats give llama-quantize's bytes.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "runtime/quant.h"

namespace sb::quant_fit {

// ggml's rounding of a float (|v| < 2^22) to the nearest integer, ties to even.
inline int nearest_int(float v) {
  const float shifted = v + 12582912.f;
  int32_t i;
  std::memcpy(&i, &shifted, 4);
  return (i & 0x007fffff) - 0x00400000;
}

// The value of v[n] of largest magnitude (the first of equals; +0 when all
// are 0), its magnitude in *amax: the search every ggml quantizer opens with.
inline float largest_magnitude(const float* v, int n, float* amax) {
  float max = 0;
  *amax = 0;
  for (int i = 0; i < n; ++i)
    if (std::fabs(v[i]) > *amax) {
      *amax = std::fabs(v[i]);
      max = v[i];
    }
  return max;
}

// ggml's make_qkx2_quants: levels L[n] (n <= 32) in [0, nmax] and a scale and
// min for n values, the min searched over nstep + 1 trial scales; the error
// is weighted squares, or absolute values when `mad`.
float fit_scale_min(int n, int nmax, const float* x, const float* weights, uint8_t* L, float* the_min, float rmin,
                    float rdelta, int nstep, bool mad);

// One block of each of the low-bit types, as llama-quantize writes it without
// an importance matrix (IEEE subnormals: the caller's mode).
void quantize_q2_k(const float* x, BlockQ2_K* y);
void quantize_q3_k(const float* x, BlockQ3_K* y);
void quantize_iq4_nl(const float* x, BlockIQ4_NL* y);
void quantize_iq4_xs(const float* x, BlockIQ4_XS* y);

}  // namespace sb::quant_fit
