// Small fp32 matrix products inside one kernel call (the chunked delta rule,
// attention tiles): C[i, j] (+)= sum over k of A[i, k] * B[k, j], each element
// one fused multiply-add chain in ascending k, starting from C's value (or
// +0). Register tiles of 4 rows by 64 columns only decide which chains run
// side by side, so the bits depend on the operands alone.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "runtime/cpu/simd.h"

namespace sb::cpu {

namespace small_gemm_detail {

template <int MR, int NV>
inline void tile(int64_t K, const float* a, int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc,
                 bool accumulate) {
  V16 acc[MR][NV];
  for (int i = 0; i < MR; ++i)
    for (int v = 0; v < NV; ++v) acc[i][v] = accumulate ? V16::load(c + i * ldc + 16 * v) : V16::zero();
  for (int64_t k = 0; k < K; ++k) {
    V16 bv[NV];
    for (int v = 0; v < NV; ++v) bv[v] = V16::load(b + k * ldb + 16 * v);
    for (int i = 0; i < MR; ++i) {
      const V16 av = V16::set1(a[i * lda + k]);
      for (int v = 0; v < NV; ++v) acc[i][v] = fma(av, bv[v], acc[i][v]);
    }
  }
  for (int i = 0; i < MR; ++i)
    for (int v = 0; v < NV; ++v) acc[i][v].store(c + i * ldc + 16 * v);
}

template <int MR>
inline void rows(int64_t N, int64_t K, const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
                 int64_t ldc, bool accumulate) {
  int64_t j = 0;
  for (; j + 64 <= N; j += 64) tile<MR, 4>(K, a, lda, b + j, ldb, c + j, ldc, accumulate);
  for (; j + 16 <= N; j += 16) tile<MR, 1>(K, a, lda, b + j, ldb, c + j, ldc, accumulate);
  for (; j < N; ++j)
    for (int i = 0; i < MR; ++i) {
      float s = accumulate ? c[i * ldc + j] : 0.0f;
      for (int64_t k = 0; k < K; ++k) s = std::fma(a[i * lda + k], b[k * ldb + j], s);
      c[i * ldc + j] = s;
    }
}

}  // namespace small_gemm_detail

// C[M, N] = A[M, K] B[K, N] (accumulate: C += A B). Row-major with leading
// dimensions; C must not alias A or B. lower: A is lower triangular (zero
// where k > i), and a tile of rows stops its chains after its last row's
// diagonal (the products skipped are exact zeros).
inline void small_gemm(int64_t M, int64_t N, int64_t K, const float* a, int64_t lda, const float* b, int64_t ldb,
                       float* c, int64_t ldc, bool accumulate, bool lower = false) {
  using namespace small_gemm_detail;
  int64_t i = 0;
  auto depth = [&](int64_t rows_end) { return lower ? std::min(K, rows_end) : K; };
  for (; i + 4 <= M; i += 4) rows<4>(N, depth(i + 4), a + i * lda, lda, b, ldb, c + i * ldc, ldc, accumulate);
  for (; i < M; ++i) rows<1>(N, depth(i + 1), a + i * lda, lda, b, ldb, c + i * ldc, ldc, accumulate);
}

}  // namespace sb::cpu
