// Small fp32 matrix products inside one kernel call (the chunked delta rule,
// attention tiles): C[i, j] (+)= sum over k of A[i, k] * B[k, j], each element
// one fused multiply-add chain in ascending k, starting from C's value (or
// +0). Register tiles of 4 rows by up to 64 columns only decide which chains run
// side by side, so the bits depend on the operands alone.
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

// All rows in tiles of 4 (then 1), for the columns [j, j + NV * 16). With
// `lower`, row i's chain runs over k <= row0 + i exactly: a tile runs to its
// first row's diagonal, then each later row finishes its own chain alone.
template <int NV>
inline void column_block(int64_t M, int64_t K, const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
                         int64_t ldc, bool accumulate, bool lower, int64_t row0) {
  int64_t i = 0;
  for (; i + 4 <= M; i += 4) {
    if (!lower) {
      tile<4, NV>(K, a + i * lda, lda, b, ldb, c + i * ldc, ldc, accumulate);
      continue;
    }
    const int64_t k0 = std::min(K, row0 + i + 1);
    tile<4, NV>(k0, a + i * lda, lda, b, ldb, c + i * ldc, ldc, accumulate);
    for (int64_t r = i + 1; r < i + 4; ++r) {
      const int64_t k1 = std::min(K, row0 + r + 1);
      if (k1 > k0) tile<1, NV>(k1 - k0, a + r * lda + k0, lda, b + k0 * ldb, ldb, c + r * ldc, ldc, true);
    }
  }
  for (; i < M; ++i)
    tile<1, NV>(lower ? std::min(K, row0 + i + 1) : K, a + i * lda, lda, b, ldb, c + i * ldc, ldc, accumulate);
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
  // Columns outer: a block of B (K x 64 floats) stays in L1 while every row
  // tile passes over it.
  int64_t j = 0;
  for (; j + 64 <= N; j += 64) column_block<4>(M, K, a, lda, b + j, ldb, c + j, ldc, accumulate, lower, row0);
  // The rest in one block of 16, 32 or 48 columns (a tile of one vector
  // per row loads as much as it computes).
  const int64_t rest = (N - j) / 16;
  if (rest == 3) column_block<3>(M, K, a, lda, b + j, ldb, c + j, ldc, accumulate, lower, row0);
  if (rest == 2) column_block<2>(M, K, a, lda, b + j, ldb, c + j, ldc, accumulate, lower, row0);
  if (rest == 1) column_block<1>(M, K, a, lda, b + j, ldb, c + j, ldc, accumulate, lower, row0);
  j += 16 * rest;
  for (; j < N; ++j)
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
