// V16: sixteen float lanes with fused multiply-add, the unit of every
// reduction in the CPU kernels.
//
// The three implementations (AVX-512, AVX2+FMA, scalar) give identical bits:
// each lane is an exactly rounded fma chain, and horizontal sums use one fixed
// tree. So a kernel's result depends on its data only, never on the machine's
// vector width or on how many rows a call processes.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <initializer_list>

#include "runtime/dtype.h"

#if defined(__AVX512F__)
#include <immintrin.h>
#define SB_V16_AVX512 1
#elif defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define SB_V16_AVX2 1
#endif

namespace sb::cpu {

#if SB_V16_AVX512
struct V16 {
  __m512 v;
  static V16 zero() { return {_mm512_setzero_ps()}; }
  static V16 load(const float* p) { return {_mm512_loadu_ps(p)}; }
  static V16 load_bf16(const uint16_t* p) {
    __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    return {_mm512_castsi512_ps(_mm512_slli_epi32(w, 16))};
  }
  // 16 words of bf16 pairs: element 0 of each pair to `even`, 1 to `odd`.
  static void load_bf16_pairs(const uint32_t* p, V16* even, V16* odd) {
    __m512i w = _mm512_loadu_si512(p);
// GCC 12 takes the shift's _mm512_undefined_epi32() operand for an uninitialised read.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#if !defined(__clang__)  // a GCC-only warning
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
    even->v = _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
#pragma GCC diagnostic pop
    odd->v = _mm512_castsi512_ps(_mm512_and_si512(w, _mm512_set1_epi32(static_cast<int>(0xffff0000u))));
  }
  static V16 set1(float x) { return {_mm512_set1_ps(x)}; }
  void store(float* p) const { _mm512_storeu_ps(p, v); }
  friend V16 fma(V16 a, V16 b, V16 c) { return {_mm512_fmadd_ps(a.v, b.v, c.v)}; }
  // Subnormal lanes to signed zero.
  friend V16 ftz(V16 a) {
    __m512i bits = _mm512_castps_si512(a.v);
    __mmask16 sub = _mm512_cmplt_epu32_mask(_mm512_and_si512(bits, _mm512_set1_epi32(0x7fffffff)),
                                            _mm512_set1_epi32(0x00800000));
    return {_mm512_castsi512_ps(
        _mm512_mask_and_epi32(bits, sub, bits, _mm512_set1_epi32(static_cast<int>(0x80000000u))))};
  }
  friend V16 operator+(V16 a, V16 b) { return {_mm512_add_ps(a.v, b.v)}; }
  friend V16 operator-(V16 a, V16 b) { return {_mm512_sub_ps(a.v, b.v)}; }
  friend V16 operator*(V16 a, V16 b) { return {_mm512_mul_ps(a.v, b.v)}; }
  friend V16 operator/(V16 a, V16 b) { return {_mm512_div_ps(a.v, b.v)}; }
// GCC 12 takes these intrinsics' _mm512_undefined operand for an uninitialised read.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#if !defined(__clang__)  // a GCC-only warning
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
  // a < b ? a : b and a > b ? a : b, lane by lane (a NaN in a gives b).
  friend V16 min(V16 a, V16 b) { return {_mm512_min_ps(a.v, b.v)}; }
  friend V16 max(V16 a, V16 b) { return {_mm512_max_ps(a.v, b.v)}; }
  // Each lane's 32 bits shifted left by n.
  friend V16 shift_bits_left(V16 a, int n) {
    return {_mm512_castsi512_ps(_mm512_sllv_epi32(_mm512_castps_si512(a.v), _mm512_set1_epi32(n)))};
  }
#pragma GCC diagnostic pop
};
#elif SB_V16_AVX2
struct V16 {
  __m256 lo, hi;
  static V16 zero() { return {_mm256_setzero_ps(), _mm256_setzero_ps()}; }
  static V16 load(const float* p) { return {_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8)}; }
  static V16 load_bf16(const uint16_t* p) {
    __m256i a = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    __m256i b = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 8)));
    return {_mm256_castsi256_ps(_mm256_slli_epi32(a, 16)), _mm256_castsi256_ps(_mm256_slli_epi32(b, 16))};
  }
  static void load_bf16_pairs(const uint32_t* p, V16* even, V16* odd) {
    const __m256i mask = _mm256_set1_epi32(static_cast<int>(0xffff0000u));
    __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 8));
    *even = {_mm256_castsi256_ps(_mm256_slli_epi32(a, 16)), _mm256_castsi256_ps(_mm256_slli_epi32(b, 16))};
    *odd = {_mm256_castsi256_ps(_mm256_and_si256(a, mask)), _mm256_castsi256_ps(_mm256_and_si256(b, mask))};
  }
  static V16 set1(float x) { return {_mm256_set1_ps(x), _mm256_set1_ps(x)}; }
  void store(float* p) const {
    _mm256_storeu_ps(p, lo);
    _mm256_storeu_ps(p + 8, hi);
  }
  friend V16 fma(V16 a, V16 b, V16 c) { return {_mm256_fmadd_ps(a.lo, b.lo, c.lo), _mm256_fmadd_ps(a.hi, b.hi, c.hi)}; }
  friend V16 ftz(V16 a) {
    auto half = [](__m256 x) {
      const __m256 abs = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), x);
      const __m256 sub = _mm256_cmp_ps(abs, _mm256_set1_ps(0x1p-126f), _CMP_LT_OQ);
      return _mm256_blendv_ps(x, _mm256_and_ps(x, _mm256_set1_ps(-0.0f)), sub);
    };
    return {half(a.lo), half(a.hi)};
  }
  friend V16 operator+(V16 a, V16 b) { return {_mm256_add_ps(a.lo, b.lo), _mm256_add_ps(a.hi, b.hi)}; }
  friend V16 operator-(V16 a, V16 b) { return {_mm256_sub_ps(a.lo, b.lo), _mm256_sub_ps(a.hi, b.hi)}; }
  friend V16 operator*(V16 a, V16 b) { return {_mm256_mul_ps(a.lo, b.lo), _mm256_mul_ps(a.hi, b.hi)}; }
  friend V16 operator/(V16 a, V16 b) { return {_mm256_div_ps(a.lo, b.lo), _mm256_div_ps(a.hi, b.hi)}; }
  friend V16 min(V16 a, V16 b) { return {_mm256_min_ps(a.lo, b.lo), _mm256_min_ps(a.hi, b.hi)}; }
  friend V16 max(V16 a, V16 b) { return {_mm256_max_ps(a.lo, b.lo), _mm256_max_ps(a.hi, b.hi)}; }
  friend V16 shift_bits_left(V16 a, int n) {
    const __m128i count = _mm_cvtsi32_si128(n);
    return {_mm256_castsi256_ps(_mm256_sll_epi32(_mm256_castps_si256(a.lo), count)),
            _mm256_castsi256_ps(_mm256_sll_epi32(_mm256_castps_si256(a.hi), count))};
  }
};
#else
struct V16 {
  float v[16];
  static V16 zero() { return set1(0.0f); }
  static V16 load(const float* p) {
    V16 r;
    std::memcpy(r.v, p, sizeof r.v);
    return r;
  }
  static V16 load_bf16(const uint16_t* p) {
    V16 r;
    for (int i = 0; i < 16; ++i) r.v[i] = bf16_to_f32(p[i]);
    return r;
  }
  static void load_bf16_pairs(const uint32_t* p, V16* even, V16* odd) {
    for (int i = 0; i < 16; ++i) {
      const uint32_t lo = p[i] << 16, hi = p[i] & 0xffff0000u;
      std::memcpy(&even->v[i], &lo, 4);
      std::memcpy(&odd->v[i], &hi, 4);
    }
  }
  static V16 set1(float x) {
    V16 r;
    for (float& f : r.v) f = x;
    return r;
  }
  void store(float* p) const { std::memcpy(p, v, sizeof v); }
  friend V16 fma(V16 a, V16 b, V16 c) {
    V16 r;
    for (int i = 0; i < 16; ++i) r.v[i] = std::fma(a.v[i], b.v[i], c.v[i]);
    return r;
  }
  friend V16 ftz(V16 a) {
    for (float& f : a.v)
      if (std::fabs(f) < 0x1p-126f) f = std::copysign(0.0f, f);
    return a;
  }
  friend V16 operator+(V16 a, V16 b) {
    V16 r;
    for (int i = 0; i < 16; ++i) r.v[i] = a.v[i] + b.v[i];
    return r;
  }
  friend V16 operator*(V16 a, V16 b) {
    V16 r;
    for (int i = 0; i < 16; ++i) r.v[i] = a.v[i] * b.v[i];
    return r;
  }
  friend V16 operator-(V16 a, V16 b) {
    V16 r;
    for (int i = 0; i < 16; ++i) r.v[i] = a.v[i] - b.v[i];
    return r;
  }
  friend V16 operator/(V16 a, V16 b) {
    V16 r;
    for (int i = 0; i < 16; ++i) r.v[i] = a.v[i] / b.v[i];
    return r;
  }
  friend V16 min(V16 a, V16 b) {
    V16 r;
    for (int i = 0; i < 16; ++i) r.v[i] = a.v[i] < b.v[i] ? a.v[i] : b.v[i];
    return r;
  }
  friend V16 max(V16 a, V16 b) {
    V16 r;
    for (int i = 0; i < 16; ++i) r.v[i] = a.v[i] > b.v[i] ? a.v[i] : b.v[i];
    return r;
  }
  friend V16 shift_bits_left(V16 a, int n) {
    for (float& f : a.v) {
      uint32_t u;
      std::memcpy(&u, &f, 4);
      u <<= n;
      std::memcpy(&f, &u, 4);
    }
    return a;
  }
};
#endif

// e^x lane by lane, within 2 ulp for x in (-87, 88], from operations that
// round the same on every backend (fma, add, min, max, a bit shift), so that
// its bits do not depend on the machine. +0 for x <= -87 (and -inf: a
// softmax's masked scores), e^88 for x > 88; a NaN stays NaN. exp_f
// (runtime/math.h) is the same sequence on one float: the same bits.
inline V16 vexp(V16 x0) {
  const V16 x = min(V16::set1(88.0f), max(V16::set1(-87.0f), x0));
  // t = 1.5 * 2^23 + 127 + round(x / ln 2): adding the large constant rounds
  // to an integer, which lands in the low mantissa bits, so that shifting
  // t's bits left by 23 leaves exactly the bits of 2^round(x / ln 2).
  const V16 magic = V16::set1(12582912.0f + 127.0f);
  const V16 t = fma(x, V16::set1(1.44269504f), magic);
  const V16 n = t - magic;
  // r = x - n ln 2 in two steps (the high part of ln 2 has few enough bits
  // that n * its value is exact), |r| <= 0.35.
  V16 r = fma(n, V16::set1(-0.693145751953125f), x);
  r = fma(n, V16::set1(-1.42860677e-06f), r);
  // e^r by its Taylor series to r^7 (truncation under 2^-24 of the result).
  V16 p = V16::set1(1.0f / 5040.0f);
  for (float c : {1.0f / 720.0f, 1.0f / 120.0f, 1.0f / 24.0f, 1.0f / 6.0f, 0.5f, 1.0f, 1.0f}) p = fma(p, r, V16::set1(c));
  // 1 for x > -87, +0 for x <= -87, NaN for NaN: x + 87 is a multiple of
  // 2^-17 near -87, so (x + 87) 2^30 is 0 or at least 2^13 in magnitude.
  const V16 near = fma(x0, V16::set1(1073741824.0f), V16::set1(87.0f * 1073741824.0f));
  const V16 keep = min(V16::set1(1.0f), max(V16::zero(), near));
  return p * shift_bits_left(t, 23) * keep;
}

// Lane 0 of x: the scalar form of a lane-wise function runs the vector code
// on one lane, so that a scalar tail gets the bits of a vector lane.
inline float lane0(V16 x) {
  alignas(64) float t[16];
  x.store(t);
  return t[0];
}

// The fixed horizontal sum: lanes (i, i+8), then (i, i+4), (i, i+2), (i, i+1).
inline float hsum(V16 x) {
  alignas(64) float t[16];
  x.store(t);
  for (int w = 8; w >= 1; w /= 2)
    for (int i = 0; i < w; ++i) t[i] = t[i] + t[i + w];
  return t[0];
}

// out[k] = hsum(v[k]) for k < 16, bit for bit: the same tree, run on all
// sixteen vectors at once (15 vector adds instead of 60 scalar ones).
inline void hsum16(const V16* v, float* out) {
#if SB_V16_AVX512
// GCC 12 takes the shuffles' _mm512_undefined_ps() operand for an uninitialised read.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#if !defined(__clang__)  // a GCC-only warning
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
  __m512 b[8], c[4], d[2];
  for (int i = 0; i < 8; ++i)  // level 1: lanes i and i+8 (x in lanes 0-7, y in 8-15)
    b[i] = _mm512_add_ps(_mm512_shuffle_f32x4(v[2 * i].v, v[2 * i + 1].v, 0x44),
                         _mm512_shuffle_f32x4(v[2 * i].v, v[2 * i + 1].v, 0xEE));
  for (int i = 0; i < 4; ++i)  // level 2: lanes i and i+4, one 128-bit lane per vector
    c[i] = _mm512_add_ps(_mm512_shuffle_f32x4(b[2 * i], b[2 * i + 1], 0x88),
                         _mm512_shuffle_f32x4(b[2 * i], b[2 * i + 1], 0xDD));
  for (int i = 0; i < 2; ++i)  // level 3: lanes i and i+2
    d[i] = _mm512_add_ps(_mm512_shuffle_ps(c[2 * i], c[2 * i + 1], 0x44),
                         _mm512_shuffle_ps(c[2 * i], c[2 * i + 1], 0xEE));
  // Level 4: lanes 0 and 1. Vector k's sum lands at position 4 (k % 4) + k / 4.
  const __m512 e = _mm512_add_ps(_mm512_shuffle_ps(d[0], d[1], 0x88), _mm512_shuffle_ps(d[0], d[1], 0xDD));
  const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  _mm512_storeu_ps(out, _mm512_permutexvar_ps(order, e));
#pragma GCC diagnostic pop
#else
  for (int k = 0; k < 16; ++k) out[k] = hsum(v[k]);
#endif
}

// Dot product of two f32 vectors of length n in the fixed order: lane l
// accumulates elements l, l+16, ... with fma; a tail (n % 16) is accumulated
// sequentially after the tree sum.
inline float dot(const float* a, const float* b, int64_t n) {
  V16 acc = V16::zero();
  int64_t k = 0;
  for (; k + 16 <= n; k += 16) acc = fma(V16::load(a + k), V16::load(b + k), acc);
  float s = hsum(acc);
  for (; k < n; ++k) s = std::fma(a[k], b[k], s);
  return s;
}

}  // namespace sb::cpu
