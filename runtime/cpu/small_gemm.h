// Small fp32 matrix products inside one kernel call (the chunked delta rule,
// attention tiles): C[i, j] (+)= sum over k of A[i, k] * B[k, j], each element
// one fused multiply-add chain in ascending k, starting from C's value (or
// +0). Register tiles of up to 6 rows by up to 64 columns only decide which
// chains run side by side, so the bits depend on the operands alone.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "runtime/cpu/simd.h"

namespace sb::cpu {

namespace small_gemm_detail {

// Keeps a loaded vector in registers: without it GCC folds the load into each
// fma that uses it, and a tile issues MR loads of B per k instead of one.
inline void keep_in_register(V16& x) {
#if SB_V16_AVX512
  asm("" : "+v"(x.v));
#elif SB_V16_AVX2
  asm("" : "+x"(x.lo), "+x"(x.hi));
#else
  (void)x;
#endif
}

template <int MR, int NV>
inline void tile(int64_t K, const float* a, int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc,
                 bool accumulate) {
  V16 acc[MR][NV];
  for (int i = 0; i < MR; ++i)
    for (int v = 0; v < NV; ++v) acc[i][v] = accumulate ? V16::load(c + i * ldc + 16 * v) : V16::zero();
  for (int64_t k = 0; k < K; ++k) {
    V16 bv[NV];
    for (int v = 0; v < NV; ++v) {
      bv[v] = V16::load(b + k * ldb + 16 * v);
      keep_in_register(bv[v]);
    }
    for (int i = 0; i < MR; ++i) {
      const V16 av = V16::set1(a[i * lda + k]);
      for (int v = 0; v < NV; ++v) acc[i][v] = fma(av, bv[v], acc[i][v]);
    }
  }
  for (int i = 0; i < MR; ++i)
    for (int v = 0; v < NV; ++v) acc[i][v].store(c + i * ldc + 16 * v);
}

// A tile's lower triangle past its first row's diagonal: `steps` more
// steps k = 0, 1, ... (a, b at that diagonal), step k for rows k + 1 and
// later only, so row r's chain ends min(r, steps) steps on. Apart from
// tile's loop (with it, GCC kept tile's sums in memory); unrolled whole, so
// that every index into acc is a constant.
template <int MR, int NV>
inline void triangle(int64_t steps, const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
                     int64_t ldc) {
  V16 acc[MR][NV];
#pragma GCC unroll 8
  for (int i = 1; i < MR; ++i)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) acc[i][v] = V16::load(c + i * ldc + 16 * v);
#pragma GCC unroll 8
  for (int k = 0; k < MR - 1; ++k) {
    if (k >= steps) break;
    V16 bv[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) bv[v] = V16::load(b + k * ldb + 16 * v);
#pragma GCC unroll 8
    for (int i = k + 1; i < MR; ++i) {
      const V16 av = V16::set1(a[i * lda + k]);
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[i][v] = fma(av, bv[v], acc[i][v]);
    }
  }
#pragma GCC unroll 8
  for (int i = 1; i < MR; ++i)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) acc[i][v].store(c + i * ldc + 16 * v);
}

// The most rows of a tile: 6 x 4 vectors of sums, 4 of B and one of A fill
// 29 of the 32 vector registers, and each k loads 4 vectors and 6 floats
// for 24 fmas (4 rows: 4 and 4 for 16).
constexpr int kTileRows = 6;

// Rows [0, R) of a row tile (R <= kTileRows), columns [0, 16 NV): K steps,
// then the triangle's `tail` steps.
template <int R, int NV>
inline void rows_of(int64_t K, int64_t tail, const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
                    int64_t ldc, bool accumulate) {
  tile<R, NV>(K, a, lda, b, ldb, c, ldc, accumulate);
  if (tail > 0) triangle<R, NV>(tail, a + K, lda, b + K * ldb, ldb, c, ldc);
}

// rows_of for a row count known at run time.
template <int NV>
inline void row_tile(int64_t R, int64_t K, int64_t tail, const float* a, int64_t lda, const float* b, int64_t ldb,
                     float* c, int64_t ldc, bool accumulate) {
  switch (R) {
    case 6: return rows_of<6, NV>(K, tail, a, lda, b, ldb, c, ldc, accumulate);
    case 5: return rows_of<5, NV>(K, tail, a, lda, b, ldb, c, ldc, accumulate);
    case 4: return rows_of<4, NV>(K, tail, a, lda, b, ldb, c, ldc, accumulate);
    case 3: return rows_of<3, NV>(K, tail, a, lda, b, ldb, c, ldc, accumulate);
    case 2: return rows_of<2, NV>(K, tail, a, lda, b, ldb, c, ldc, accumulate);
    default: return rows_of<1, NV>(K, tail, a, lda, b, ldb, c, ldc, accumulate);
  }
}

}  // namespace small_gemm_detail

// C[M, N] = A[M, K] B[K, N] (accumulate: C += A B). Row-major with leading
// dimensions; C must not alias A or B. lower: A is rows row0.. of a lower
// triangular matrix (zero where k > row0 + i) and row i's chain stops at
// k = row0 + i, so a row's bits depend neither on how many rows follow it nor
// on how many before it are in the call.
inline void small_gemm(int64_t M, int64_t N, int64_t K, const float* a, int64_t lda, const float* b, int64_t ldb,
                       float* c, int64_t ldc, bool accumulate, bool lower = false, int64_t row0 = 0) {
  using namespace small_gemm_detail;
  // Rows outer: a tile's rows of A stay in L1 while it passes over B's
  // columns, 64 at a time, then the rest in one block of 16, 32 or 48 (a
  // tile of one vector per row loads as much as it computes). Columns outer,
  // a block of B (128 x 64 floats, all of L1) was evicted by its own rows.
  const int64_t N64 = N / 64 * 64, rest = (N - N64) / 16;
  for (int64_t i = 0; i < M; i += kTileRows) {
    const int64_t R = std::min<int64_t>(kTileRows, M - i);
    const int64_t k0 = lower ? std::min(K, row0 + i + 1) : K, tail = std::min(R - 1, K - k0);
    const float* ai = a + i * lda;
    float* ci = c + i * ldc;
    for (int64_t j = 0; j < N64; j += 64) row_tile<4>(R, k0, tail, ai, lda, b + j, ldb, ci + j, ldc, accumulate);
    if (rest == 3) row_tile<3>(R, k0, tail, ai, lda, b + N64, ldb, ci + N64, ldc, accumulate);
    if (rest == 2) row_tile<2>(R, k0, tail, ai, lda, b + N64, ldb, ci + N64, ldc, accumulate);
    if (rest == 1) row_tile<1>(R, k0, tail, ai, lda, b + N64, ldb, ci + N64, ldc, accumulate);
  }
  for (int64_t j = N64 + 16 * rest; j < N; ++j)
    for (int64_t i = 0; i < M; ++i) {
      const int64_t depth = lower ? std::min(K, row0 + i + 1) : K;
      float s = accumulate ? c[i * ldc + j] : 0.0f;
      for (int64_t k = 0; k < depth; ++k) s = std::fma(a[i * lda + k], b[k * ldb + j], s);
      c[i * ldc + j] = s;
    }
}

// s[i * lds + j] = dot(a_i, b_j) (simd.h: the lane-split chain and the fixed
// tree) for i < M, j < N; rows a_i at a + i * lda, b_j at b + j * ldb, all
// of length K. Tiles of 4 x 4 only decide which dot products run side by side.
inline void small_dots(int64_t M, int64_t N, int64_t K, const float* a, int64_t lda, const float* b, int64_t ldb,
                       float* s, int64_t lds) {
  const int64_t K16 = K / 16 * 16;
  int64_t i = 0;
  for (; i + 4 <= M; i += 4) {
    int64_t j = 0;
    for (; j + 4 <= N; j += 4) {
      V16 acc[16];
      for (auto& x : acc) x = V16::zero();
      for (int64_t k = 0; k < K16; k += 16) {
        V16 bv[4];
        for (int jj = 0; jj < 4; ++jj) bv[jj] = V16::load(b + (j + jj) * ldb + k);
        for (int ii = 0; ii < 4; ++ii) {
          const V16 av = V16::load(a + (i + ii) * lda + k);
          for (int jj = 0; jj < 4; ++jj) acc[ii * 4 + jj] = fma(av, bv[jj], acc[ii * 4 + jj]);
        }
      }
      alignas(64) float sums[16];
      hsum16(acc, sums);
      for (int ii = 0; ii < 4; ++ii)
        for (int jj = 0; jj < 4; ++jj) {
          float t = sums[ii * 4 + jj];
          for (int64_t k = K16; k < K; ++k) t = std::fma(a[(i + ii) * lda + k], b[(j + jj) * ldb + k], t);
          s[(i + ii) * lds + j + jj] = t;
        }
    }
    for (; j < N; ++j)
      for (int ii = 0; ii < 4; ++ii) s[(i + ii) * lds + j] = dot(a + (i + ii) * lda, b + j * ldb, K);
  }
  for (; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) s[i * lds + j] = dot(a + i * lda, b + j * ldb, K);
}

}  // namespace sb::cpu
