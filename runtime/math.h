// statebank's own transcendental functions: every e^x, log, sin, cos and
// power of the forward pass and the sampler, built only from +, -, *, /,
// explicit fused multiply-adds and integer operations on the bits, so that
// they give the same bits on every machine, compiler and C library (why, and
// each function's accuracy: docs/kernels.md, "Our own functions").
// Contract: the accuracy bounds docs/kernels.md lists (math_test asserts
// them); exp_f is the bits of a lane of vexp (runtime/cpu/simd.h); NaN stays
// NaN. Changing any of them changes what a restored state means: bump the
// numerics version (runtime/kernels.h).
// Pure functions; thread-safe.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

namespace sb {

// e^x in float, the operation sequence of vexp's lanes (runtime/cpu/simd.h
// keeps the two in step; math_test compares them over a sweep).
inline float exp_f(float x0) {
  // x clamped to [-87, 88] as max(-87, x) then min(88, .) lane by lane (a
  // NaN passes through both).
  float x = -87.0f > x0 ? -87.0f : x0;
  x = 88.0f < x ? 88.0f : x;
  // t = 1.5 * 2^23 + 127 + round(x / ln 2); its low mantissa bits shifted
  // left by 23 are the bits of 2^round(x / ln 2).
  const float magic = 12582912.0f + 127.0f;
  const float t = std::fma(x, 1.44269504f, magic);
  const float n = t - magic;
  float r = std::fma(n, -0.693145751953125f, x);
  r = std::fma(n, -1.42860677e-06f, r);
  float p = 1.0f / 5040.0f;
  for (float c : {1.0f / 720.0f, 1.0f / 120.0f, 1.0f / 24.0f, 1.0f / 6.0f, 0.5f, 1.0f, 1.0f}) p = std::fma(p, r, c);
  const float scale = std::bit_cast<float>(std::bit_cast<uint32_t>(t) << 23);
  // 1 for x > -87, +0 for x <= -87, NaN for NaN: x + 87 is a multiple of
  // 2^-17 near -87, so (x + 87) 2^30 is 0 or at least 2^13 in magnitude.
  float keep = std::fma(x0, 1073741824.0f, 87.0f * 1073741824.0f);
  keep = 0.0f > keep ? 0.0f : keep;
  keep = 1.0f < keep ? 1.0f : keep;
  return p * scale * keep;
}

// 2^n for an integer n in [-1022, 1023].
inline double exp2i_d(int64_t n) { return std::bit_cast<double>(static_cast<uint64_t>(n + 1023) << 52); }

// e^x in double. Without branches (NaN and the ends are selected after the
// arithmetic, on an argument clamped into range), so a loop over an array
// of it vectorizes: the sampler weighs a whole vocabulary with it per token.
inline double exp_d(double x) {
  constexpr double kLog2e = 1.4426950408889634, kMagic = 6755399441055744.0;  // 1.5 * 2^52
  // ln 2 in two parts, the first with 32 significant bits (n times it is exact).
  constexpr double kLn2Hi = 6.93147180369123816490e-01, kLn2Lo = 1.90821492927058770002e-10;
  const double xc = x < -708.0 ? -708.0 : x > 709.0 ? 709.0 : x == x ? x : 0.0;
  const double n = std::fma(xc, kLog2e, kMagic) - kMagic;  // round(x / ln 2)
  double r = std::fma(-n, kLn2Hi, xc);
  r = std::fma(-n, kLn2Lo, r);  // |r| <= 0.347
  // e^r by its Taylor series to r^13 (truncation under 2^-57 of the result).
  double p = 1.0 / 6227020800.0;
#pragma GCC unroll 16
  for (double c : {1.0 / 479001600.0, 1.0 / 39916800.0, 1.0 / 3628800.0, 1.0 / 362880.0, 1.0 / 40320.0,
                   1.0 / 5040.0, 1.0 / 720.0, 1.0 / 120.0, 1.0 / 24.0, 1.0 / 6.0, 0.5, 1.0, 1.0})
    p = std::fma(p, r, c);
  double y = p * exp2i_d(static_cast<int64_t>(n));
  y = x > 709.0 ? std::numeric_limits<double>::infinity() : y;
  y = x < -708.0 ? 0.0 : y;
  return x == x ? y : x;
}

// The natural logarithm in double.
inline double log_d(double x) {
  if (x != x || x < 0.0) return std::numeric_limits<double>::quiet_NaN();
  if (x == 0.0) return -std::numeric_limits<double>::infinity();
  if (x == std::numeric_limits<double>::infinity()) return x;
  int64_t e = 0;
  if (x < 2.2250738585072014e-308) {  // subnormal: scale into the normal range
    x *= 18014398509481984.0;         // 2^54
    e = -54;
  }
  const uint64_t bits = std::bit_cast<uint64_t>(x);
  e += static_cast<int64_t>(bits >> 52) - 1023;
  double m = std::bit_cast<double>((bits & 0x000fffffffffffffull) | 0x3ff0000000000000ull);  // [1, 2)
  if (m > 1.4142135623730951) {
    m *= 0.5;  // exact
    ++e;
  }
  // log m = 2 atanh(s), s = (m - 1) / (m + 1), |s| <= 0.1716: the odd series
  // to s^25 (truncation under 2^-60 of the result).
  const double f = m - 1.0;  // exact
  const double s = f / (2.0 + f), s2 = s * s;
  double q = 1.0 / 25.0;
  for (int k = 23; k >= 1; k -= 2) q = std::fma(q, s2, 1.0 / k);
  const double log_m = 2.0 * s * q;
  constexpr double kLn2Hi = 6.93147180369123816490e-01, kLn2Lo = 1.90821492927058770002e-10;
  const double de = static_cast<double>(e);
  return de * kLn2Hi + std::fma(de, kLn2Lo, log_m);
}

namespace math_detail {
// (-1)^j / n! for n = 2j + odd, j < count: the Taylor coefficients of sin
// (odd) and cos (even) in powers of r^2, each rounded once at compile time.
template <int count, int odd>
constexpr auto taylor() {
  struct Table {
    double c[count];
    constexpr double operator[](int j) const { return c[j]; }
  } t{};
  double fact = 1.0;  // n!, exact in double up to 22!
  int n = 0;
  for (int j = 0; j < count; ++j) {
    for (; n < 2 * j + odd; ) fact *= ++n;
    t.c[j] = (j % 2 == 0 ? 1.0 : -1.0) / fact;
  }
  return t;
}
}  // namespace math_detail

inline constexpr auto kSinTaylor = math_detail::taylor<10, 1>();  // 1/1!, -1/3!, ..., -1/19!
inline constexpr auto kCosTaylor = math_detail::taylor<11, 0>();  // 1/0!, -1/2!, ..., 1/20!

// sin x and cos x in double.
inline void sincos_d(double x, double* sin_out, double* cos_out) {
  if (!(std::fabs(x) <= 1.0e15)) {  // NaN, infinities, beyond any argument the callers pass
    *sin_out = *cos_out = std::numeric_limits<double>::quiet_NaN();
    return;
  }
  // r = x - k pi/2, k = round(x 2/pi), with pi/2 in three parts of 33
  // significant bits and a fourth (fdlibm's), each step one fused
  // multiply-add: the first is exact, the others round relative to r.
  constexpr double kInvPio2 = 6.36619772367581382433e-01, kMagic = 6755399441055744.0;
  constexpr double kPio2_1 = 1.57079632673412561417e+00, kPio2_2 = 6.07710050630396597660e-11,
                   kPio2_3 = 2.02226624871116645580e-21, kPio2_3t = 8.47842766036889956997e-32;
  const double k = std::fma(x, kInvPio2, kMagic) - kMagic;
  double r = std::fma(-k, kPio2_1, x);
  r = std::fma(-k, kPio2_2, r);
  r = std::fma(-k, kPio2_3, r);
  r = std::fma(-k, kPio2_3t, r);  // |r| <= pi/4 (a little more when x / (pi/2) rounds at a half)
  // Taylor series: sin to r^19, cos to r^20 (truncation under 2^-60).
  const double r2 = r * r;
  double s = kSinTaylor[9], c = kCosTaylor[10];
  for (int j = 8; j >= 0; --j) s = std::fma(s, r2, kSinTaylor[j]);
  for (int j = 9; j >= 0; --j) c = std::fma(c, r2, kCosTaylor[j]);
  s *= r;
  switch (static_cast<int64_t>(k) & 3) {
    case 0: *sin_out = s, *cos_out = c; break;
    case 1: *sin_out = c, *cos_out = -s; break;
    case 2: *sin_out = -s, *cos_out = -c; break;
    default: *sin_out = -c, *cos_out = s; break;
  }
}

// log(1 + e^x) in double, rounded once to float: PyTorch's softplus below
// its threshold (the caller returns x itself above 20).
inline float softplus_f(float x) {
  const double u = exp_d(static_cast<double>(x));
  const double w = 1.0 + u;
  // log1p u = log w * u / (w - 1): the rounding of 1 + u cancels (Goldberg).
  const double y = w == 1.0 ? u : log_d(w) * (u / (w - 1.0));
  // +0 below the normal floats, whatever the thread's float mode.
  return y < 0x1p-126 ? 0.0f : static_cast<float>(y);
}

}  // namespace sb
