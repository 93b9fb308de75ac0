// The f32 product (Precision::kF32), row invariant: y[i, j] = dot(x[i, :], w[j, :]) with the fixed V16
// reduction of simd.h. Tiles of 4 x rows by 4 weight rows only decide which
// dot products run side by side; each one's arithmetic is the same as in a
// lone 1 x 1 call, so a prefill split differently, a decode step or a batch
// of another size computes the same bits for the same row.
#include <algorithm>

#include "runtime/cpu/cpu_kernels.h"
#include "runtime/cpu/float_mode.h"
#include "runtime/cpu/simd.h"

namespace sb::cpu {
namespace {

template <typename W>
inline V16 load_w(const W* p);
template <>
inline V16 load_w<float>(const float* p) { return V16::load(p); }
template <>
inline V16 load_w<uint16_t>(const uint16_t* p) { return V16::load_bf16(p); }

inline float w_scalar(const float* p) { return *p; }
inline float w_scalar(const uint16_t* p) { return bf16_to_f32(*p); }

// Computes a tile of MR x rows by NR weight rows; K is the shared length.
template <typename W, int MR, int NR>
void tile(const float* x, int64_t ldx, const W* w, int64_t ldw, int64_t K, float* y, int64_t ldy) {
  V16 acc[MR][NR];
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) acc[i][j] = V16::zero();
  int64_t k = 0;
  for (; k + 16 <= K; k += 16) {
    V16 wv[NR];
    for (int j = 0; j < NR; ++j) wv[j] = load_w<W>(w + j * ldw + k);
    for (int i = 0; i < MR; ++i) {
      V16 xv = V16::load(x + i * ldx + k);
      for (int j = 0; j < NR; ++j) acc[i][j] = fma(xv, wv[j], acc[i][j]);
    }
  }
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) {
      float s = hsum(acc[i][j]);
      for (int64_t kk = k; kk < K; ++kk) s = std::fma(x[i * ldx + kk], w_scalar(w + j * ldw + kk), s);
      y[i * ldy + j] = s;
    }
}

template <typename W>
void matmul_rows(const float* x, int64_t m, const W* w, int64_t n0, int64_t n1, int64_t K, int64_t N, float* y) {
  constexpr int kNr = 4;
  int64_t j = n0;
  for (; j + kNr <= n1; j += kNr) {
    const W* wj = w + j * K;
    int64_t i = 0;
    for (; i + 4 <= m; i += 4) tile<W, 4, kNr>(x + i * K, K, wj, K, K, y + i * N + j, N);
    for (; i < m; ++i) tile<W, 1, kNr>(x + i * K, K, wj, K, K, y + i * N + j, N);
  }
  for (; j < n1; ++j) {
    const W* wj = w + j * K;
    int64_t i = 0;
    for (; i + 4 <= m; i += 4) tile<W, 4, 1>(x + i * K, K, wj, K, K, y + i * N + j, N);
    for (; i < m; ++i) tile<W, 1, 1>(x + i * K, K, wj, K, K, y + i * N + j, N);
  }
}

}  // namespace

void CpuKernels::matmul_f32(const float* x, int64_t m, const WeightRef& w, float* y) {
  FlushSubnormals mode;
  const int64_t N = w.rows, K = w.cols;
  // Column panels small enough that a panel of weights stays in L2 while the
  // x rows stream past it; rows in slabs so that x stays in L1/L2 per panel.
  const int64_t panel = std::max<int64_t>(4, std::min<int64_t>(64, (N + pool_->size() * 4 - 1) / (pool_->size() * 4) / 4 * 4 + 4));
  const int64_t n_panels = (N + panel - 1) / panel;
  constexpr int64_t kSlab = 64;
  pool_->parallel_for(n_panels, [&](int64_t p) {
    const int64_t n0 = p * panel, n1 = std::min(N, n0 + panel);
    for (int64_t i0 = 0; i0 < m; i0 += kSlab) {
      const int64_t rows = std::min(kSlab, m - i0);
      if (w.dtype == DType::kBF16)
        matmul_rows(x + i0 * K, rows, static_cast<const uint16_t*>(w.data), n0, n1, K, N, y + i0 * N);
      else
        matmul_rows(x + i0 * K, rows, static_cast<const float*>(w.data), n0, n1, K, N, y + i0 * N);
    }
  });
}

}  // namespace sb::cpu
