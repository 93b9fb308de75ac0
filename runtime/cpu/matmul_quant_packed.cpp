// Q8_0 and Q4_K weights repacked at load for AVX512-VNNI (Kernels::prepare):
// 16 weight rows side by side, so that one vpdpbusd of a broadcast group of
// four activation levels gives each row's partial sum in its own lane. No
// horizontal sums remain, and a block's fold (quant_dot_ref) runs on the 16
// rows' lanes at once; the bits are those of the file-layout kernels.
//
// Layout, per group of 16 weight rows (a last group padded with zero rows),
// per block in order:
//   Q8_0 (544 bytes): the 16 f16 scales; then for each 4 levels k < 8 of the
//        block, 16 lanes of 4 bytes (row c's levels 4k..4k+3, each + 128 so
//        that they are the unsigned operand; the product's excess is 128
//        times the activations' block sum, which they carry).
//   Q4_K (2368 bytes): the 16 d, the 16 dmin (f16); the 6-bit scales [8][16]
//        and mins [8][16] (a byte each); per sub-block s, 4 x 64 bytes: lane
//        c byte t of the k-th holds level 32s + 8k + t (low nibble) and
//        32s + 8k + 4 + t (high nibble) of row c.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>

#include "runtime/cpu/cpu_kernels.h"
#include "runtime/cpu/quant_kernels.h"

namespace sb::cpu {

namespace {

constexpr int64_t kLanes = kQuantPackedRows;

int64_t block_bytes(DType dtype) { return dtype == DType::kQ8_0 ? 544 : 2368; }

void pack_q8_0_group(const uint8_t* rows[kLanes], int64_t nb, uint8_t* out) {
  for (int64_t b = 0; b < nb; ++b, out += 544) {
    for (int c = 0; c < kLanes; ++c) {
      const uint8_t* blk = rows[c] ? rows[c] + b * 34 : nullptr;
      if (blk)
        std::memcpy(out + 2 * c, blk, 2);
      else
        std::memset(out + 2 * c, 0, 2);
      for (int e = 0; e < 32; ++e) out[32 + 64 * (e / 4) + 4 * c + e % 4] = blk ? blk[2 + e] ^ 0x80 : 0x80;
    }
  }
}

void pack_q4_k_group(const uint8_t* rows[kLanes], int64_t nb, uint8_t* out) {
  for (int64_t b = 0; b < nb; ++b, out += 2368) {
    std::memset(out, 0, 2368);
    for (int c = 0; c < kLanes; ++c) {
      if (!rows[c]) continue;
      const uint8_t* blk = rows[c] + b * 144;
      std::memcpy(out + 2 * c, blk, 2);
      std::memcpy(out + 32 + 2 * c, blk + 2, 2);
      for (int s = 0; s < 8; ++s) {
        int sc, mn;
        kscale_min(blk + 4, s, &sc, &mn);
        out[64 + 16 * s + c] = static_cast<uint8_t>(sc);
        out[192 + 16 * s + c] = static_cast<uint8_t>(mn);
      }
      auto level = [&](int e) { return (blk[16 + 32 * (e / 64) + e % 32] >> (4 * ((e / 32) % 2))) & 0xF; };
      for (int s = 0; s < 8; ++s)
        for (int k = 0; k < 4; ++k)
          for (int t = 0; t < 4; ++t)
            out[320 + 256 * s + 64 * k + 4 * c + t] =
                static_cast<uint8_t>(level(32 * s + 8 * k + t) | (level(32 * s + 8 * k + 4 + t) << 4));
    }
  }
}

}  // namespace

bool quant_packs(DType dtype) { return dtype == DType::kQ8_0 || dtype == DType::kQ4_K; }

int64_t quant_packed_group_bytes(DType dtype, int64_t cols) {
  return cols / dtype_block(dtype).elems * block_bytes(dtype);
}

std::shared_ptr<const PackedWeight> pack_quant(const WeightRef& w, ThreadPool* pool) {
  const int64_t groups = (w.rows + kLanes - 1) / kLanes, group_bytes = quant_packed_group_bytes(w.dtype, w.cols);
  auto pw = std::make_shared<PackedWeight>(w.dtype, w.rows, w.cols, static_cast<size_t>(groups * group_bytes));
  const int64_t row_bytes = dtype_row_bytes(w.dtype, w.cols), nb = w.cols / dtype_block(w.dtype).elems;
  uint8_t* out = reinterpret_cast<uint8_t*>(pw->data);
  pool->parallel_for(groups, [&](int64_t g) {
    const uint8_t* rows[kLanes];
    for (int c = 0; c < kLanes; ++c) {
      const int64_t j = g * kLanes + c;
      rows[c] = j < w.rows ? static_cast<const uint8_t*>(w.data) + j * row_bytes : nullptr;
    }
    if (w.dtype == DType::kQ8_0)
      pack_q8_0_group(rows, nb, out + g * group_bytes);
    else
      pack_q4_k_group(rows, nb, out + g * group_bytes);
  });
  return pw;
}

}  // namespace sb::cpu

#if defined(__x86_64__)
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")
#include <immintrin.h>

namespace sb::cpu {
namespace {

template <int R>
struct PackedTile {
  const int8_t* q[R];
  const float* d[R];
  const int16_t* sums[R];
  __m512 acc[R];
  PackedTile(const QuantizedRows& x, int64_t i0) {
    for (int r = 0; r < R; ++r) {
      q[r] = x.row_q(i0 + r);
      d[r] = x.row_d(i0 + r);
      sums[r] = x.row_sums(i0 + r);
      acc[r] = _mm512_setzero_ps();
    }
  }
  __m512i x4(int r, int64_t at) const {
    int32_t v;
    std::memcpy(&v, q[r] + at, 4);
    return _mm512_set1_epi32(v);
  }
};

inline __m512 halves16(const uint8_t* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}

template <int R, class Fold>
inline void for_blocks(int64_t nb, DType dtype, Fold&& fold) {
  if (R > 1 && quant_mutation() == dtype) {
    for (int64_t b = nb - 1; b >= 0; --b) fold(b);
    return;
  }
  for (int64_t b = 0; b < nb; ++b) fold(b);
}

template <int R>
void packed_q8_0(const uint8_t* g, int64_t nb, PackedTile<R>& t) {
  for_blocks<R>(nb, DType::kQ8_0, [&](int64_t b) {
    const uint8_t* blk = g + b * 544;
    __m512i wk[8];
    for (int k = 0; k < 8; ++k) wk[k] = _mm512_loadu_si512(blk + 32 + 64 * k);
    const __m512 dw = halves16(blk);
    for (int r = 0; r < R; ++r) {
      __m512i I = _mm512_set1_epi32(-128 * (t.sums[r][2 * b] + t.sums[r][2 * b + 1]));
      for (int k = 0; k < 8; ++k) I = _mm512_dpbusd_epi32(I, wk[k], t.x4(r, 32 * b + 4 * k));
      t.acc[r] = _mm512_fmadd_ps(_mm512_mul_ps(dw, _mm512_set1_ps(t.d[r][b])), _mm512_cvtepi32_ps(I), t.acc[r]);
    }
  });
}

template <int R>
void packed_q4_k(const uint8_t* g, int64_t nb, PackedTile<R>& t) {
  const __m512i low4 = _mm512_set1_epi8(0x0F);
  for_blocks<R>(nb, DType::kQ4_K, [&](int64_t b) {
    const uint8_t* blk = g + b * 2368;
    __m512i I[R], M[R];
    for (int r = 0; r < R; ++r) I[r] = M[r] = _mm512_setzero_si512();
    for (int s = 0; s < 8; ++s) {
      const __m512i sc = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 64 + 16 * s)));
      const __m512i mn = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 192 + 16 * s)));
      __m512i lev[8];
      for (int k = 0; k < 4; ++k) {
        const __m512i v = _mm512_loadu_si512(blk + 320 + 256 * s + 64 * k);
        lev[2 * k] = _mm512_and_si512(v, low4);
        lev[2 * k + 1] = _mm512_and_si512(_mm512_srli_epi16(v, 4), low4);
      }
      for (int r = 0; r < R; ++r) {
        __m512i D = _mm512_setzero_si512();
        for (int j = 0; j < 8; ++j) D = _mm512_dpbusd_epi32(D, lev[j], t.x4(r, b * kSuperBlock + 32 * s + 4 * j));
        I[r] = _mm512_add_epi32(I[r], _mm512_mullo_epi32(D, sc));
        const int32_t S = t.sums[r][b * 16 + 2 * s] + t.sums[r][b * 16 + 2 * s + 1];
        M[r] = _mm512_add_epi32(M[r], _mm512_mullo_epi32(mn, _mm512_set1_epi32(S)));
      }
    }
    const __m512 d = halves16(blk), dmin = halves16(blk + 32);
    for (int r = 0; r < R; ++r) {
      const __m512 dx = _mm512_set1_ps(t.d[r][b]);
      t.acc[r] = _mm512_fmadd_ps(_mm512_mul_ps(d, dx), _mm512_cvtepi32_ps(I[r]), t.acc[r]);
      t.acc[r] = _mm512_fnmadd_ps(_mm512_mul_ps(dmin, dx), _mm512_cvtepi32_ps(M[r]), t.acc[r]);
    }
  });
}

template <int R>
void packed_tile(DType dtype, const uint8_t* g, const QuantizedRows& x, int64_t i0, float* y, int64_t ldy, int cols) {
  PackedTile<R> t(x, i0);
  const int64_t nb = x.cols / dtype_block(dtype).elems;
  if (dtype == DType::kQ8_0)
    packed_q8_0<R>(g, nb, t);
  else
    packed_q4_k<R>(g, nb, t);
  alignas(64) float lanes[kQuantPackedRows];
  for (int r = 0; r < R; ++r) {
    _mm512_store_ps(lanes, t.acc[r]);
    std::copy(lanes, lanes + cols, y + r * ldy);
  }
}

}  // namespace

void quant_packed_tile(DType dtype, const uint8_t* group, const QuantizedRows& x, int64_t i0, int rows, float* y,
                       int64_t ldy, int cols) {
  switch (rows) {
    case 1:
      return packed_tile<1>(dtype, group, x, i0, y, ldy, cols);
    case 2:
      return packed_tile<2>(dtype, group, x, i0, y, ldy, cols);
    case 3:
      return packed_tile<3>(dtype, group, x, i0, y, ldy, cols);
    default:
      return packed_tile<4>(dtype, group, x, i0, y, ldy, cols);
  }
}

}  // namespace sb::cpu
#pragma GCC pop_options
#endif
