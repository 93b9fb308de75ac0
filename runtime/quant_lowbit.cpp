// The reference quantizers of Q2_K, Q3_K, IQ4_NL and IQ4_XS (runtime/quant.h):
// llama-quantize's without an importance matrix (ggml-quants.c, llama.cpp
// de3ff81), each float expression in ggml's order and types so that the
// same floats give the same bytes. IQ4_NL is the one whose function differs
// from ggml's quantize_row_iq4_nl_ref: llama-quantize runs the scale search
// with 7 trials on each side, the _ref function none.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "runtime/quant_fit.h"

namespace sb {

const int8_t kIq4Values[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

namespace quant_fit {
namespace {

constexpr float kAllZero = 1e-15f;  // ggml's GROUP_MAX_EPS
inline float half(uint16_t h) { return f16_to_f32(h); }

// The 2-bit levels L[256] packed as Q2_K and Q3_K hold them.
void pack_two_bits(const uint8_t* L, uint8_t* qs) {
  for (int h = 0; h < 2; ++h)
    for (int l = 0; l < 32; ++l) {
      const uint8_t* Lh = L + 128 * h;
      qs[32 * h + l] = static_cast<uint8_t>(Lh[l] | (Lh[l + 32] << 2) | (Lh[l + 64] << 4) | (Lh[l + 96] << 6));
    }
}

// ggml's make_q3_quants with its rmse search, 16 values, nmax 4: levels
// L + 4 in [0, 7] (all 0 for a block of zeros) and their scale.
float fit_scale_q3(const float* x, uint8_t* out) {
  constexpr int n = 16, nmax = 4;
  float amax;
  const float max = largest_magnitude(x, n, &amax);
  if (amax < kAllZero) {
    std::fill(out, out + n, 0);
    return 0.0f;
  }
  const float iscale = -static_cast<float>(nmax) / max;
  int L[n];
  float sumlx = 0, suml2 = 0;
  for (int i = 0; i < n; ++i) {
    L[i] = std::clamp(nearest_int(iscale * x[i]), -nmax, nmax - 1);
    const float w = x[i] * x[i];
    sumlx += w * x[i] * static_cast<float>(L[i]);
    suml2 += w * static_cast<float>(L[i]) * static_cast<float>(L[i]);
  }
  for (int pass = 0; pass < 5; ++pass) {
    int changed = 0;
    for (int i = 0; i < n; ++i) {
      const float w = x[i] * x[i];
      float slx = sumlx - w * x[i] * static_cast<float>(L[i]);
      if (!(slx > 0)) continue;
      float sl2 = suml2 - w * static_cast<float>(L[i]) * static_cast<float>(L[i]);
      const int l = std::clamp(nearest_int(x[i] * sl2 / slx), -nmax, nmax - 1);
      if (l == L[i]) continue;
      slx += w * x[i] * static_cast<float>(l);
      sl2 += w * static_cast<float>(l) * static_cast<float>(l);
      if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
        L[i] = l;
        sumlx = slx;
        suml2 = sl2;
        ++changed;
      }
    }
    if (changed == 0) break;
  }
  for (int i = 0; i < n; ++i) out[i] = static_cast<uint8_t>(L[i] + nmax);
  return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

// ggml's best_index_int8 over kIq4Values: the nearest entry, the upper of two
// at equal distance.
int nearest_iq4(float x) {
  const int8_t* v = kIq4Values;
  if (x <= v[0]) return 0;
  if (x >= v[15]) return 15;
  int lo = 0, hi = 15;
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    (x < v[mid] ? hi : lo) = mid;
  }
  return x - v[hi - 1] < v[hi] - x ? hi - 1 : hi;
}

// The weighted fit of one IQ4 block of 32 (weights x^2): the scale searched
// over 15 trials, levels into L[32]; 0 for a block of zeros.
float fit_scale_iq4(const float* x, uint8_t* L) {
  constexpr int n = 32, ntry = 7;
  const int8_t* v = kIq4Values;
  float amax;
  const float max = largest_magnitude(x, n, &amax);
  if (amax < kAllZero) return 0.0f;
  float id = 1 / (-max / static_cast<float>(v[0]));
  float sumqx = 0, sumq2 = 0;
  for (int j = 0; j < n; ++j) {
    L[j] = static_cast<uint8_t>(nearest_iq4(id * x[j]));
    const float q = v[L[j]], w = x[j] * x[j];
    sumqx += w * q * x[j];
    sumq2 += w * q * q;
  }
  float d = sumq2 > 0 ? sumqx / sumq2 : 0.0f;
  float best = d * sumqx;
  for (int t = -ntry; t <= ntry; ++t) {
    id = static_cast<float>(t + v[0]) / max;
    sumqx = sumq2 = 0;
    for (int j = 0; j < n; ++j) {
      const float q = v[nearest_iq4(id * x[j])], w = x[j] * x[j];
      sumqx += w * q * x[j];
      sumq2 += w * q * q;
    }
    if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
      d = sumqx / sumq2;
      best = d * sumqx;
    }
  }
  return d;
}

// 32 levels packed as the IQ4 types hold them (value j low nibble, j + 16 high).
void pack_nibbles(const uint8_t* L, uint8_t* qs) {
  for (int j = 0; j < 16; ++j) qs[j] = static_cast<uint8_t>(L[j] | (L[16 + j] << 4));
}

}  // namespace

void quantize_q2_k(const float* x, BlockQ2_K* y) {
  constexpr float kQ4Scale = 15.f;
  uint8_t L[kSuperBlock];
  float weights[16], mins[16], scales[16], max_scale = 0, max_min = 0;
  for (int j = 0; j < 16; ++j) {
    for (int l = 0; l < 16; ++l) weights[l] = std::fabs(x[16 * j + l]);
    scales[j] = fit_scale_min(16, 3, x + 16 * j, weights, L + 16 * j, &mins[j], -0.5f, 0.1f, 15, true);
    if (scales[j] > max_scale) max_scale = scales[j];
    if (mins[j] > max_min) max_min = mins[j];
  }
  std::memset(y->scales, 0, sizeof y->scales);
  y->d = y->dmin = f32_to_f16(0.f);
  if (max_scale > 0) {
    const float iscale = kQ4Scale / max_scale;
    for (int j = 0; j < 16; ++j) y->scales[j] = static_cast<uint8_t>(nearest_int(iscale * scales[j]));
    y->d = f32_to_f16(max_scale / kQ4Scale);
  }
  if (max_min > 0) {
    const float iscale = kQ4Scale / max_min;
    for (int j = 0; j < 16; ++j)
      y->scales[j] = static_cast<uint8_t>(y->scales[j] | (nearest_int(iscale * mins[j]) << 4));
    y->dmin = f32_to_f16(max_min / kQ4Scale);
  }
  for (int j = 0; j < 16; ++j) {
    const float d = half(y->d) * static_cast<float>(y->scales[j] & 0xF);
    if (d == 0.0f) continue;  // keeps the fit's levels, as ggml does
    const float dm = half(y->dmin) * static_cast<float>(y->scales[j] >> 4);
    for (int i = 0; i < 16; ++i)
      L[16 * j + i] = static_cast<uint8_t>(std::clamp(nearest_int((x[16 * j + i] + dm) / d), 0, 3));
  }
  pack_two_bits(L, y->qs);
}

void quantize_q3_k(const float* x, BlockQ3_K* y) {
  uint8_t L[kSuperBlock];
  float scales[16], amax;
  for (int j = 0; j < 16; ++j) scales[j] = fit_scale_q3(x + 16 * j, L + 16 * j);
  const float max_scale = largest_magnitude(scales, 16, &amax);
  std::memset(y->scales, 0, sizeof y->scales);
  y->d = f32_to_f16(0.f);
  if (max_scale != 0.0f) {
    const float iscale = -32.f / max_scale;
    for (int j = 0; j < 16; ++j) {
      const int l = std::clamp<int>(static_cast<int8_t>(nearest_int(iscale * scales[j])), -32, 31) + 32;
      if (j < 8)
        y->scales[j] = static_cast<uint8_t>(l & 0xF);
      else
        y->scales[j - 8] = static_cast<uint8_t>(y->scales[j - 8] | ((l & 0xF) << 4));
      y->scales[8 + j % 4] = static_cast<uint8_t>(y->scales[8 + j % 4] | ((l >> 4) << (2 * (j / 4))));
    }
    y->d = f32_to_f16(1 / iscale);
  }
  for (int j = 0; j < 16; ++j) {
    const float d = half(y->d) * static_cast<float>(q3k_scale(y->scales, j) - 32);
    if (d == 0.0f) continue;
    for (int i = 0; i < 16; ++i)
      L[16 * j + i] = static_cast<uint8_t>(std::clamp(nearest_int(x[16 * j + i] / d), -4, 3) + 4);
  }
  std::memset(y->hmask, 0, sizeof y->hmask);
  for (int j = 0; j < kSuperBlock; ++j)
    if (L[j] > 3) {
      y->hmask[j % 32] = static_cast<uint8_t>(y->hmask[j % 32] | (1 << (j / 32)));
      L[j] = static_cast<uint8_t>(L[j] - 4);
    }
  pack_two_bits(L, y->qs);
}

void quantize_iq4_nl(const float* x, BlockIQ4_NL* y) {
  uint8_t L[32];
  const float d = fit_scale_iq4(x, L);
  y->d = f32_to_f16(d);
  const float id = d != 0.0f ? 1 / d : 0.0f;
  for (int j = 0; j < 32; ++j) L[j] = static_cast<uint8_t>(nearest_iq4(id * x[j]));
  pack_nibbles(L, y->qs);
}

void quantize_iq4_xs(const float* x, BlockIQ4_XS* y) {
  uint8_t L[32];
  float scales[8], amax;
  for (int s = 0; s < 8; ++s) scales[s] = fit_scale_iq4(x + 32 * s, L);
  const float max_scale = largest_magnitude(scales, 8, &amax);
  const float d = -max_scale / 32;  // -0 when every sub-block is zero, as ggml stores it
  y->d = f32_to_f16(d);
  y->scales_h = 0;
  std::memset(y->scales_l, 0, sizeof y->scales_l);
  const float id = d != 0.0f ? 1 / d : 0.0f;
  for (int s = 0; s < 8; ++s) {
    const int l = std::clamp(nearest_int(id * scales[s]), -32, 31);
    const float dl = d * static_cast<float>(l);
    const float idl = dl != 0.0f ? 1 / dl : 0.0f;
    for (int j = 0; j < 32; ++j) L[j] = static_cast<uint8_t>(nearest_iq4(idl * x[32 * s + j]));
    pack_nibbles(L, y->qs + 16 * s);
    const int biased = l + 32;
    y->scales_l[s / 2] = static_cast<uint8_t>(y->scales_l[s / 2] | ((biased & 0xF) << (4 * (s % 2))));
    y->scales_h = static_cast<uint16_t>(y->scales_h | ((biased >> 4) << (2 * s)));
  }
}

}  // namespace quant_fit
}  // namespace sb
