// The reference quantizers follow ggml-quants.c (llama.cpp de3ff81) operation
// for operation, since the point is the same bytes: each float expression
// keeps ggml's order and types (built without fused multiply-adds, as
// llama.cpp builds ggml-base), halves round to nearest even.
#include "runtime/quant.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>

#include "runtime/quant_fit.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace sb {

float quant_fit::fit_scale_min(int n, int nmax, const float* x, const float* weights, uint8_t* L, float* the_min,
                               float rmin, float rdelta, int nstep, bool mad) {
  float min = x[0], max = x[0], sum_w = weights[0], sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    if (x[i] < min) min = x[i];
    if (x[i] > max) max = x[i];
    sum_w += weights[i];
    sum_x += weights[i] * x[i];
  }
  if (min > 0) min = 0;
  if (max == min) {
    std::fill(L, L + n, 0);
    *the_min = -min;
    return 0.0f;
  }
  float iscale = static_cast<float>(nmax) / (max - min);
  float scale = 1 / iscale;
  float best_error = 0;
  for (int i = 0; i < n; ++i) {
    L[i] = static_cast<uint8_t>(std::clamp(nearest_int(iscale * (x[i] - min)), 0, nmax));
    const float diff = scale * L[i] + min - x[i];
    best_error += weights[i] * (mad ? std::fabs(diff) : diff * diff);
  }
  uint8_t aux[32];
  for (int is = 0; is <= nstep; ++is) {
    iscale = (rmin + rdelta * static_cast<float>(is) + static_cast<float>(nmax)) / (max - min);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < n; ++i) {
      const int l = std::clamp(nearest_int(iscale * (x[i] - min)), 0, nmax);
      aux[i] = static_cast<uint8_t>(l);
      const float w = weights[i];
      sum_l += w * l;
      sum_l2 += w * l * l;
      sum_xl += w * l * x[i];
    }
    const float D = sum_w * sum_l2 - sum_l * sum_l;
    if (!(D > 0)) continue;
    float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
    float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
    if (this_min > 0) {
      this_min = 0;
      this_scale = sum_xl / sum_l2;
    }
    float cur_error = 0;
    for (int i = 0; i < n; ++i) {
      const float diff = this_scale * aux[i] + this_min - x[i];
      cur_error += weights[i] * (mad ? std::fabs(diff) : diff * diff);
    }
    if (cur_error < best_error) {
      std::copy(aux, aux + n, L);
      best_error = cur_error;
      scale = this_scale;
      min = this_min;
    }
  }
  *the_min = -min;
  return scale;
}


namespace {

// Sets the thread's subnormal handling for a scope: IEEE for the reference
// quantizers (llama.cpp runs them so), flushed for the activation side (the
// kernels' float mode, runtime/cpu/float_mode.h), wherever the caller runs.
class SubnormalMode {
 public:
#if defined(__x86_64__) || defined(__i386__)
  explicit SubnormalMode(bool flush) : saved_(_mm_getcsr()) {
    constexpr unsigned kBits = 0x8040;  // FTZ | DAZ
    const unsigned want = flush ? (saved_ | kBits) : (saved_ & ~kBits);
    if (want != saved_) _mm_setcsr(want);
  }
  ~SubnormalMode() { _mm_setcsr(saved_); }

 private:
  unsigned saved_;
#else
  explicit SubnormalMode(bool) {}
#endif
};

using quant_fit::nearest_int;

inline float half(uint16_t h) { return f16_to_f32(h); }

void quantize_q8_0(const float* x, BlockQ8_0* y) {
  float amax = 0.0f;
  for (int j = 0; j < 32; ++j) amax = amax > std::fabs(x[j]) ? amax : std::fabs(x[j]);  // ggml's MAX
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  y->d = f32_to_f16(d);
  for (int j = 0; j < 32; ++j) y->qs[j] = static_cast<int8_t>(std::roundf(x[j] * id));
}

void quantize_q4_0(const float* x, BlockQ4_0* y) {
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < 32; ++j)
    if (amax < std::fabs(x[j])) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  const float d = max / -8.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  y->d = f32_to_f16(d);
  for (int j = 0; j < 16; ++j) {
    const int lo = std::min(15, static_cast<int>(static_cast<int8_t>(x[j] * id + 8.5f)));
    const int hi = std::min(15, static_cast<int>(static_cast<int8_t>(x[16 + j] * id + 8.5f)));
    y->qs[j] = static_cast<uint8_t>(lo | (hi << 4));
  }
}

// The fifth bits of a Q5_0/Q5_1 block's 32 levels (level j's in bit j).
void pack_fifth_bits(const int* levels, uint8_t* qs, uint8_t* qh) {
  uint32_t bits = 0;
  for (int j = 0; j < 16; ++j) {
    qs[j] = static_cast<uint8_t>((levels[j] & 0xF) | ((levels[16 + j] & 0xF) << 4));
    bits |= static_cast<uint32_t>((levels[j] >> 4) & 1) << j;
    bits |= static_cast<uint32_t>((levels[16 + j] >> 4) & 1) << (16 + j);
  }
  std::memcpy(qh, &bits, 4);
}

void quantize_q5_0(const float* x, BlockQ5_0* y) {
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < 32; ++j)
    if (amax < std::fabs(x[j])) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  const float d = max / -16.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  y->d = f32_to_f16(d);
  int levels[32];
  for (int j = 0; j < 32; ++j) levels[j] = std::min(31, static_cast<int>(static_cast<int8_t>(x[j] * id + 16.5f)));
  pack_fifth_bits(levels, y->qs, y->qh);
}

void quantize_q5_1(const float* x, BlockQ5_1* y) {
  float min = x[0], max = x[0];
  for (int j = 1; j < 32; ++j) {
    if (x[j] < min) min = x[j];
    if (x[j] > max) max = x[j];
  }
  const float d = (max - min) / 31.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  y->d = f32_to_f16(d);
  y->m = f32_to_f16(min);
  int levels[32];
  for (int j = 0; j < 32; ++j) levels[j] = static_cast<uint8_t>((x[j] - min) * id + 0.5f);
  pack_fifth_bits(levels, y->qs, y->qh);
}

// The shared front of Q4_K and Q5_K: sub-block scales and mins as 6-bit
// numbers under the f16 d and dmin, then each value's level under them.
void quantize_k_scales(const float* x, int nmax, float rmin, int nstep, uint16_t* d_out, uint16_t* dmin_out,
                       uint8_t* packed, uint8_t* L) {
  float scales[8], mins[8], weights[32], max_scale = 0, max_min = 0;
  for (int j = 0; j < 8; ++j) {
    float sum_x2 = 0;
    for (int l = 0; l < 32; ++l) sum_x2 += x[32 * j + l] * x[32 * j + l];
    const float av_x = std::sqrt(sum_x2 / 32.0f);
    for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(x[32 * j + l]);
    scales[j] = quant_fit::fit_scale_min(32, nmax, x + 32 * j, weights, L + 32 * j, &mins[j], rmin, 0.1f, nstep, false);
    if (scales[j] > max_scale) max_scale = scales[j];
    if (mins[j] > max_min) max_min = mins[j];
  }
  const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
  const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
  std::memset(packed, 0, 12);
  for (int j = 0; j < 8; ++j) {
    const uint8_t ls = std::min<uint8_t>(63, static_cast<uint8_t>(nearest_int(inv_scale * scales[j])));
    const uint8_t lm = std::min<uint8_t>(63, static_cast<uint8_t>(nearest_int(inv_min * mins[j])));
    if (j < 4) {
      packed[j] = ls;
      packed[j + 4] = lm;
    } else {
      packed[j + 4] = static_cast<uint8_t>((ls & 0xF) | ((lm & 0xF) << 4));
      packed[j - 4] |= static_cast<uint8_t>((ls >> 4) << 6);
      packed[j] |= static_cast<uint8_t>((lm >> 4) << 6);
    }
  }
  *d_out = f32_to_f16(max_scale / 63.f);
  *dmin_out = f32_to_f16(max_min / 63.f);
  for (int j = 0; j < 8; ++j) {
    int sc, m;
    kscale_min(packed, j, &sc, &m);
    const float d = half(*d_out) * static_cast<float>(sc);
    if (d == 0.0f) continue;  // keeps the fit's levels, as ggml does
    const float dm = half(*dmin_out) * static_cast<float>(m);
    for (int i = 0; i < 32; ++i)
      L[32 * j + i] = static_cast<uint8_t>(std::clamp(nearest_int((x[32 * j + i] + dm) / d), 0, nmax));
  }
}

void quantize_q4_k(const float* x, BlockQ4_K* y) {
  uint8_t L[kSuperBlock];
  quantize_k_scales(x, 15, -1.0f, 20, &y->d, &y->dmin, y->scales, L);
  for (int j = 0; j < 4; ++j)
    for (int l = 0; l < 32; ++l) y->qs[32 * j + l] = static_cast<uint8_t>(L[64 * j + l] | (L[64 * j + 32 + l] << 4));
}

void quantize_q5_k(const float* x, BlockQ5_K* y) {
  uint8_t L[kSuperBlock];
  quantize_k_scales(x, 31, -0.5f, 15, &y->d, &y->dmin, y->scales, L);
  std::memset(y->qh, 0, sizeof y->qh);
  for (int j = 0; j < 4; ++j)
    for (int l = 0; l < 32; ++l) {
      const int lo = L[64 * j + l], hi = L[64 * j + 32 + l];
      y->qh[l] |= static_cast<uint8_t>(((lo >> 4) << (2 * j)) | ((hi >> 4) << (2 * j + 1)));
      y->qs[32 * j + l] = static_cast<uint8_t>((lo & 0xF) | ((hi & 0xF) << 4));
    }
}

// ggml's make_qx_quants with rmse_type 1 for 16 values, nmax 32: levels
// L - 32 in [-32, 31] and their scale, searched over 18 trial scales.
float fit_scale_q6(const float* x, int8_t* L) {
  constexpr int n = 16, nmax = 32;
  float max = 0, amax = 0;
  for (int i = 0; i < n; ++i)
    if (std::fabs(x[i]) > amax) {
      amax = std::fabs(x[i]);
      max = x[i];
    }
  if (amax < 1e-15f) {
    std::fill(L, L + n, 0);
    return 0.0f;
  }
  auto level = [&](float iscale, int i) { return std::clamp(nearest_int(iscale * x[i]), -nmax, nmax - 1); };
  float iscale = -static_cast<float>(nmax) / max;
  float sumlx = 0, suml2 = 0;
  for (int i = 0; i < n; ++i) {
    const int l = level(iscale, i);
    L[i] = static_cast<int8_t>(l + nmax);
    const float w = x[i] * x[i];
    sumlx += w * x[i] * l;
    suml2 += w * l * l;
  }
  float scale = suml2 != 0 ? sumlx / suml2 : 0.0f;
  float best = scale * sumlx;
  for (int is = -9; is <= 9; ++is) {
    if (is == 0) continue;
    iscale = -(static_cast<float>(nmax) + 0.1f * static_cast<float>(is)) / max;
    sumlx = suml2 = 0;
    for (int i = 0; i < n; ++i) {
      const int l = level(iscale, i);
      const float w = x[i] * x[i];
      sumlx += w * x[i] * l;
      suml2 += w * l * l;
    }
    if (suml2 > 0 && sumlx * sumlx > best * suml2) {
      for (int i = 0; i < n; ++i) L[i] = static_cast<int8_t>(nmax + level(iscale, i));
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

void quantize_q6_k(const float* x, BlockQ6_K* y) {
  int8_t L[kSuperBlock];
  float scales[16], max_abs_scale;
  for (int ib = 0; ib < 16; ++ib) scales[ib] = fit_scale_q6(x + 16 * ib, L + 16 * ib);
  const float max_scale = quant_fit::largest_magnitude(scales, 16, &max_abs_scale);
  std::memset(y, 0, sizeof *y);
  if (max_abs_scale < 1e-15f) return;  // d = +0, every level 0
  const float iscale = -128.f / max_scale;
  y->d = f32_to_f16(1 / iscale);
  for (int ib = 0; ib < 16; ++ib) y->scales[ib] = static_cast<int8_t>(std::min(127, nearest_int(iscale * scales[ib])));
  for (int j = 0; j < 16; ++j) {
    const float d = half(y->d) * static_cast<float>(y->scales[j]);
    if (d == 0.0f) continue;
    for (int i = 0; i < 16; ++i)
      L[16 * j + i] = static_cast<int8_t>(std::clamp(nearest_int(x[16 * j + i] / d), -32, 31) + 32);
  }
  for (int h = 0; h < 2; ++h) {
    const int8_t* Lh = L + 128 * h;
    uint8_t* ql = y->ql + 64 * h;
    for (int l = 0; l < 32; ++l) {
      ql[l] = static_cast<uint8_t>((Lh[l] & 0xF) | ((Lh[l + 64] & 0xF) << 4));
      ql[l + 32] = static_cast<uint8_t>((Lh[l + 32] & 0xF) | ((Lh[l + 96] & 0xF) << 4));
      y->qh[32 * h + l] = static_cast<uint8_t>((Lh[l] >> 4) | ((Lh[l + 32] >> 4) << 2) | ((Lh[l + 64] >> 4) << 4) |
                                               ((Lh[l + 96] >> 4) << 6));
    }
  }
}

// Each format's elements as ggml computes them (levels n and their scales
// as below), in element order; dequantize_block picks one.
void dequantize_q8_0(const uint8_t* in, float* out) {
  BlockQ8_0 b;
  std::memcpy(&b, in, sizeof b);
  for (int i = 0; i < 32; ++i) out[i] = static_cast<float>(b.qs[i]) * half(b.d);
}

void dequantize_q4_0(const uint8_t* in, float* out) {
  BlockQ4_0 b;
  std::memcpy(&b, in, sizeof b);
  for (int i = 0; i < 16; ++i) {
    out[i] = half(b.d) * static_cast<float>((b.qs[i] & 0xF) - 8);
    out[16 + i] = half(b.d) * static_cast<float>((b.qs[i] >> 4) - 8);
  }
}

void dequantize_q5(DType dtype, const uint8_t* in, float* out) {
  int n[32];
  block_levels(dtype, in, n);
  uint16_t d, m;
  std::memcpy(&d, in, 2);
  std::memcpy(&m, in + 2, 2);
  for (int i = 0; i < 32; ++i)
    out[i] = dtype == DType::kQ5_0 ? static_cast<float>(n[i] - 16) * half(d)
                                   : static_cast<float>(n[i]) * half(d) + half(m);
}

void dequantize_q4_q5_k(DType dtype, const uint8_t* in, float* out) {
  const bool five = dtype == DType::kQ5_K;
  BlockQ5_K b{};  // Q4_K's fields are Q5_K's without qh
  std::memcpy(&b, in, 16);
  std::memcpy(b.qs, in + (five ? 48 : 16), 128);
  if (five) std::memcpy(b.qh, in + 16, 32);
  for (int s = 0; s < 8; ++s) {
    int sc, m;
    kscale_min(b.scales, s, &sc, &m);
    const float d = half(b.d) * static_cast<float>(sc), dm = half(b.dmin) * static_cast<float>(m);
    const int j = s / 2, shift = 4 * (s % 2);
    for (int l = 0; l < 32; ++l) {
      const int n = ((b.qs[32 * j + l] >> shift) & 0xF) | (five ? ((b.qh[l] >> s) & 1) << 4 : 0);
      out[32 * s + l] = d * static_cast<float>(n) - dm;
    }
  }
}

void dequantize_q6_k(const uint8_t* in, float* out) {
  BlockQ6_K b;
  std::memcpy(&b, in, sizeof b);
  for (int e = 0; e < kSuperBlock; ++e) {
    const int h = e / 128, quarter = (e % 128) / 32, l = e % 32;
    const int low = (b.ql[64 * h + l + 32 * (quarter % 2)] >> (4 * (quarter / 2))) & 0xF;
    const int high = (b.qh[32 * h + l] >> (2 * quarter)) & 3;
    out[e] = half(b.d) * static_cast<float>(b.scales[e / 16]) * static_cast<float>((low | (high << 4)) - 32);
  }
}

void dequantize_q2_k(const uint8_t* in, float* out) {
  BlockQ2_K b;
  std::memcpy(&b, in, sizeof b);
  int n[kSuperBlock];
  block_levels(DType::kQ2_K, in, n);
  for (int s = 0; s < 16; ++s) {
    const float dl = half(b.d) * static_cast<float>(b.scales[s] & 0xF);
    const float ml = half(b.dmin) * static_cast<float>(b.scales[s] >> 4);
    for (int l = 0; l < 16; ++l) out[16 * s + l] = dl * static_cast<float>(n[16 * s + l]) - ml;
  }
}

void dequantize_q3_k(const uint8_t* in, float* out) {
  BlockQ3_K b;
  std::memcpy(&b, in, sizeof b);
  int n[kSuperBlock];
  block_levels(DType::kQ3_K, in, n);
  for (int s = 0; s < 16; ++s) {
    const float dl = half(b.d) * static_cast<float>(q3k_scale(b.scales, s) - 32);
    for (int l = 0; l < 16; ++l) out[16 * s + l] = dl * static_cast<float>(n[16 * s + l] - 4);
  }
}

void dequantize_iq4_nl(const uint8_t* in, float* out) {
  int n[32];
  block_levels(DType::kIQ4_NL, in, n);
  const float d = half(static_cast<uint16_t>(in[0] | (in[1] << 8)));
  for (int i = 0; i < 32; ++i) out[i] = d * static_cast<float>(kIq4Values[n[i]]);
}

void dequantize_iq4_xs(const uint8_t* in, float* out) {
  int n[kSuperBlock];
  block_levels(DType::kIQ4_XS, in, n);
  const float d = half(static_cast<uint16_t>(in[0] | (in[1] << 8)));
  for (int s = 0; s < 8; ++s) {
    const float dl = d * static_cast<float>(iq4xs_scale(in, s) - 32);
    for (int l = 0; l < 32; ++l) out[32 * s + l] = dl * static_cast<float>(kIq4Values[n[32 * s + l]]);
  }
}

void dequantize_block(DType dtype, const uint8_t* in, float* out) {
  switch (dtype) {
    case DType::kQ8_0:
      return dequantize_q8_0(in, out);
    case DType::kQ4_0:
      return dequantize_q4_0(in, out);
    case DType::kQ5_0:
    case DType::kQ5_1:
      return dequantize_q5(dtype, in, out);
    case DType::kQ4_K:
    case DType::kQ5_K:
      return dequantize_q4_q5_k(dtype, in, out);
    case DType::kQ6_K:
      return dequantize_q6_k(in, out);
    case DType::kQ2_K:
      return dequantize_q2_k(in, out);
    case DType::kQ3_K:
      return dequantize_q3_k(in, out);
    case DType::kIQ4_NL:
      return dequantize_iq4_nl(in, out);
    case DType::kIQ4_XS:
      return dequantize_iq4_xs(in, out);
    default:
      return;
  }
}

}  // namespace

int q3k_scale(const uint8_t* scales, int j) {
  const int low = j < 8 ? scales[j] & 0xF : scales[j - 8] >> 4;
  return low | (((scales[8 + j % 4] >> (2 * (j / 4))) & 3) << 4);
}

int iq4xs_scale(const uint8_t* block, int j) {
  const int high = static_cast<uint16_t>(block[2] | (block[3] << 8)) >> (2 * j) & 3;
  return ((block[4 + j / 2] >> (4 * (j % 2))) & 0xF) | (high << 4);
}

void block_levels(DType dtype, const uint8_t* in, int* n) {
  switch (dtype) {
    case DType::kQ8_0:
      for (int i = 0; i < 32; ++i) n[i] = static_cast<int8_t>(in[2 + i]);
      return;
    case DType::kQ4_0:
      for (int i = 0; i < 16; ++i) {
        n[i] = in[2 + i] & 0xF;
        n[16 + i] = in[2 + i] >> 4;
      }
      return;
    case DType::kQ5_0:
    case DType::kQ5_1: {
      const uint8_t* qs = in + (dtype == DType::kQ5_0 ? 6 : 8);
      uint32_t qh;
      std::memcpy(&qh, qs - 4, 4);
      for (int i = 0; i < 16; ++i) {
        n[i] = (qs[i] & 0xF) | static_cast<int>(((qh >> i) & 1) << 4);
        n[16 + i] = (qs[i] >> 4) | static_cast<int>(((qh >> (16 + i)) & 1) << 4);
      }
      return;
    }
    case DType::kQ4_K:
    case DType::kQ5_K: {
      const bool five = dtype == DType::kQ5_K;
      const uint8_t* qs = in + (five ? 48 : 16);
      for (int s = 0; s < 8; ++s)
        for (int l = 0; l < 32; ++l)
          n[32 * s + l] = ((qs[32 * (s / 2) + l] >> (4 * (s % 2))) & 0xF) | (five ? ((in[16 + l] >> s) & 1) << 4 : 0);
      return;
    }
    case DType::kQ6_K:
      for (int e = 0; e < kSuperBlock; ++e) {
        const int h = e / 128, quarter = (e % 128) / 32, l = e % 32;
        const int low = (in[64 * h + l + 32 * (quarter % 2)] >> (4 * (quarter / 2))) & 0xF;
        n[e] = low | (((in[128 + 32 * h + l] >> (2 * quarter)) & 3) << 4);
      }
      return;
    case DType::kQ2_K:
    case DType::kQ3_K: {
      const bool three = dtype == DType::kQ3_K;
      const uint8_t* qs = in + (three ? 32 : 16);
      for (int e = 0; e < kSuperBlock; ++e) {
        const int h = e / 128, g = (e % 128) / 32, l = e % 32;
        n[e] = ((qs[32 * h + l] >> (2 * g)) & 3) | (three ? ((in[l] >> (e / 32)) & 1) << 2 : 0);
      }
      return;
    }
    case DType::kIQ4_NL:
    case DType::kIQ4_XS: {
      const bool xs = dtype == DType::kIQ4_XS;
      const uint8_t* qs = in + (xs ? 8 : 2);
      for (int s = 0; s < (xs ? 8 : 1); ++s)
        for (int j = 0; j < 16; ++j) {
          n[32 * s + j] = qs[16 * s + j] & 0xF;
          n[32 * s + 16 + j] = qs[16 * s + j] >> 4;
        }
      return;
    }
    default:
      return;
  }
}

namespace {

int64_t level_dot(const int* n, const int8_t* q, int count, int offset) {
  int64_t s = 0;
  for (int i = 0; i < count; ++i) s += static_cast<int64_t>(n[i] - offset) * q[i];
  return s;
}

// One block's contribution folded into y, as quant_dot_ref defines it.
float fold_block(DType dtype, const uint8_t* in, const int8_t* q, float dx, const int16_t* sums, float y) {
  int n[kSuperBlock];
  block_levels(dtype, in, n);
  uint16_t d, dmin = 0;
  const int d_at = dtype == DType::kQ6_K ? 208 : dtype == DType::kQ2_K ? 80 : dtype == DType::kQ3_K ? 108 : 0;
  std::memcpy(&d, in + d_at, 2);
  // Only these blocks hold a min after d (Q6_K's and Q3_K's d ends the block).
  if (dtype == DType::kQ5_1 || dtype == DType::kQ4_K || dtype == DType::kQ5_K || dtype == DType::kQ2_K)
    std::memcpy(&dmin, in + d_at + 2, 2);
  switch (dtype) {
    case DType::kQ8_0:
    case DType::kQ4_0:
    case DType::kQ5_0: {
      const int offset = dtype == DType::kQ4_0 ? 8 : dtype == DType::kQ5_0 ? 16 : 0;
      const int64_t I = level_dot(n, q, 32, offset);
      return std::fma(half(d) * dx, static_cast<float>(static_cast<int32_t>(I)), y);
    }
    case DType::kQ5_1: {
      const int64_t I = level_dot(n, q, 32, 0);
      y = std::fma(half(d) * dx, static_cast<float>(static_cast<int32_t>(I)), y);
      return std::fma(half(dmin) * dx, static_cast<float>(sums[0] + sums[1]), y);
    }
    case DType::kQ4_K:
    case DType::kQ5_K: {
      int64_t I = 0, M = 0;
      for (int s = 0; s < 8; ++s) {
        int sc, m;
        kscale_min(in + 4, s, &sc, &m);
        I += sc * level_dot(n + 32 * s, q + 32 * s, 32, 0);
        M += m * (sums[2 * s] + sums[2 * s + 1]);
      }
      y = std::fma(half(d) * dx, static_cast<float>(static_cast<int32_t>(I)), y);
      return std::fma(-(half(dmin) * dx), static_cast<float>(static_cast<int32_t>(M)), y);
    }
    case DType::kQ6_K: {
      int64_t I = 0;
      for (int s = 0; s < 16; ++s) I += static_cast<int8_t>(in[192 + s]) * level_dot(n + 16 * s, q + 16 * s, 16, 32);
      return std::fma(half(d) * dx, static_cast<float>(static_cast<int32_t>(I)), y);
    }
    case DType::kQ2_K: {
      int64_t I = 0, M = 0;
      for (int s = 0; s < 16; ++s) {
        I += (in[s] & 0xF) * level_dot(n + 16 * s, q + 16 * s, 16, 0);
        M += (in[s] >> 4) * sums[s];
      }
      y = std::fma(half(d) * dx, static_cast<float>(static_cast<int32_t>(I)), y);
      return std::fma(-(half(dmin) * dx), static_cast<float>(static_cast<int32_t>(M)), y);
    }
    case DType::kQ3_K: {
      int64_t I = 0;
      for (int s = 0; s < 16; ++s) I += (q3k_scale(in + 96, s) - 32) * level_dot(n + 16 * s, q + 16 * s, 16, 4);
      return std::fma(half(d) * dx, static_cast<float>(static_cast<int32_t>(I)), y);
    }
    case DType::kIQ4_NL:
    case DType::kIQ4_XS: {
      const bool xs = dtype == DType::kIQ4_XS;
      int64_t I = 0;
      for (int s = 0; s < (xs ? 8 : 1); ++s) {
        int64_t sub = 0;
        for (int i = 32 * s; i < 32 * s + 32; ++i) sub += kIq4Values[n[i]] * q[i];
        I += (xs ? iq4xs_scale(in, s) - 32 : 1) * sub;
      }
      return std::fma(half(d) * dx, static_cast<float>(static_cast<int32_t>(I)), y);
    }
    default:
      return y;
  }
}

}  // namespace

void QuantizedRows::reset(DType weight_type, int64_t n_rows, int64_t n_cols) {
  weight = weight_type;
  rows = n_rows;
  cols = n_cols;
  block = dtype_block(weight_type).elems;
  q.resize(static_cast<size_t>(rows * cols));
  d.resize(static_cast<size_t>(rows * (cols / block)));
  sums.resize(static_cast<size_t>(rows * (cols / 16)));
  magnitudes.resize(sums.size());
}

void QuantizedRows::quantize(const float* x, int64_t r0, int64_t r1) {
  SubnormalMode flushed(true);
  for (int64_t r = r0; r < r1; ++r) {
    const float* xr = x + (r - r0) * cols;
    int8_t* qr = q.data() + r * cols;
    for (int64_t b = 0; b < cols / block; ++b) {
      const float* xb = xr + b * block;
      float amax = 0.0f;
      for (int64_t i = 0; i < block; ++i) amax = std::max(amax, std::fabs(xb[i]));
      const float id = amax > 0.0f ? 127.0f / amax : 0.0f;
      for (int64_t i = 0; i < block; ++i) {
        // Clamped before the conversion, so that inf and NaN inputs give defined levels.
        const float v = std::clamp(xb[i] * id, -127.0f, 127.0f);
        qr[b * block + i] = static_cast<int8_t>(nearest_int(v == v ? v : 0.0f));
      }
      d[static_cast<size_t>(r * (cols / block) + b)] = activation_block_scale(block, amax);
    }
    for (int64_t g = 0; g < cols / 16; ++g) {
      int s = 0, m = 0;
      for (int i = 0; i < 16; ++i) s += qr[g * 16 + i], m += std::abs(qr[g * 16 + i]);
      sums[static_cast<size_t>(r * (cols / 16) + g)] = static_cast<int16_t>(s);
      magnitudes[static_cast<size_t>(r * (cols / 16) + g)] = static_cast<int16_t>(m);
    }
  }
}

float activation_block_scale(int64_t block, float amax) {
  if (block == kSuperBlock) return amax > 0.0f ? 1.0f / (127.0f / amax) : 0.0f;
  return f16_to_f32(f32_to_f16(amax / 127.0f));
}

void quantize_rows(DType weight, const float* x, int64_t rows, int64_t cols, QuantizedRows* out) {
  out->reset(weight, rows, cols);
  out->quantize(x, 0, rows);
}

float quant_dot_ref(DType dtype, const void* w, const QuantizedRows& x, int64_t r) {
  SubnormalMode flushed(true);
  const DTypeBlock block = dtype_block(dtype);
  const uint8_t* in = static_cast<const uint8_t*>(w);
  float y = 0.0f;
  for (int64_t b = 0; b < x.cols / block.elems; ++b)
    y = fold_block(dtype, in + b * block.bytes, x.row_q(r) + b * block.elems, x.row_d(r)[b],
                   x.row_sums(r) + b * block.elems / 16, y);
  return y;
}

void kscale_min(const uint8_t* q, int j, int* scale, int* min) {
  if (j < 4) {
    *scale = q[j] & 63;
    *min = q[j + 4] & 63;
  } else {
    *scale = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    *min = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

Status check_quant_row(DType dtype, int64_t n) {
  if (!dtype_is_quantized(dtype))
    return Status::invalid(std::string("not a block-quantized type: ") + dtype_name(dtype));
  const int64_t block = dtype_block(dtype).elems;
  if (n <= 0 || n % block != 0)
    return Status::invalid(std::string(dtype_name(dtype)) + " rows are whole blocks of " + std::to_string(block) +
                           " values; got " + std::to_string(n));
  return Status::ok();
}

Status quantize_row(DType dtype, const float* x, int64_t n, void* out) {
  if (Status s = check_quant_row(dtype, n); !s.is_ok()) return s;
  // ggml would convert NaN and infinities to integers (undefined behaviour) and
  // write garbage levels; a weight that holds them is refused instead.
  for (int64_t i = 0; i < n; ++i)
    if (!std::isfinite(x[i]))
      return Status::invalid("cannot quantize a non-finite value (" + std::to_string(x[i]) + " at " +
                             std::to_string(i) + ")");
  SubnormalMode ieee(false);
  const DTypeBlock block = dtype_block(dtype);
  uint8_t* o = static_cast<uint8_t*>(out);
  for (int64_t b = 0; b < n / block.elems; ++b, x += block.elems, o += block.bytes) {
    union {
      BlockQ8_0 q8_0;
      BlockQ4_0 q4_0;
      BlockQ5_0 q5_0;
      BlockQ5_1 q5_1;
      BlockQ4_K q4_k;
      BlockQ5_K q5_k;
      BlockQ6_K q6_k;
      BlockQ2_K q2_k;
      BlockQ3_K q3_k;
      BlockIQ4_NL iq4_nl;
      BlockIQ4_XS iq4_xs;
    } y;
    switch (dtype) {
      case DType::kQ8_0:
        quantize_q8_0(x, &y.q8_0);
        break;
      case DType::kQ4_0:
        quantize_q4_0(x, &y.q4_0);
        break;
      case DType::kQ5_0:
        quantize_q5_0(x, &y.q5_0);
        break;
      case DType::kQ5_1:
        quantize_q5_1(x, &y.q5_1);
        break;
      case DType::kQ4_K:
        quantize_q4_k(x, &y.q4_k);
        break;
      case DType::kQ5_K:
        quantize_q5_k(x, &y.q5_k);
        break;
      case DType::kQ6_K:
        quantize_q6_k(x, &y.q6_k);
        break;
      case DType::kQ2_K:
        quant_fit::quantize_q2_k(x, &y.q2_k);
        break;
      case DType::kQ3_K:
        quant_fit::quantize_q3_k(x, &y.q3_k);
        break;
      case DType::kIQ4_NL:
        quant_fit::quantize_iq4_nl(x, &y.iq4_nl);
        break;
      case DType::kIQ4_XS:
        quant_fit::quantize_iq4_xs(x, &y.iq4_xs);
        break;
      default:
        break;
    }
    std::memcpy(o, &y, static_cast<size_t>(block.bytes));
  }
  return Status::ok();
}

Status dequantize_row(DType dtype, const void* in, int64_t n, float* out) {
  if (Status s = check_quant_row(dtype, n); !s.is_ok()) return s;
  SubnormalMode ieee(false);
  const DTypeBlock block = dtype_block(dtype);
  const uint8_t* p = static_cast<const uint8_t*>(in);
  for (int64_t b = 0; b < n / block.elems; ++b) dequantize_block(dtype, p + b * block.bytes, out + b * block.elems);
  return Status::ok();
}

}  // namespace sb
