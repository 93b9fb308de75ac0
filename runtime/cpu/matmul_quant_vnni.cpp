// The quantized row kernels on AVX512-VNNI (quant_kernels.h): vpdpbusd on
// 256-bit vectors, four u8 x s8 products summed into each 32-bit lane, then
// the lane times its scale.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "runtime/cpu/float_mode.h"
#include "runtime/cpu/quant_kernels.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include "runtime/cpu/isa_target.h"
SB_ISA_TARGET_BEGIN("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")

namespace sb::cpu::quant_vnni {
namespace {
using Scales = __m256i;
inline Scales make_scales(int lo, int hi) {
  return _mm256_set_m128i(_mm_set1_epi16(static_cast<int16_t>(hi)), _mm_set1_epi16(static_cast<int16_t>(lo)));
}
inline __m256i plain_dot(__m256i u, __m256i s) { return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s); }
// The scaled sums: vpmaddubsw's 16-bit pair sums (exact: at most 2 * 63 * 127)
// into vpdpwssd, which multiplies them by the scale and accumulates.
inline __m256i scaled_dot_add(__m256i acc, __m256i u, __m256i s, Scales sc) {
  return _mm256_dpwssd_epi32(acc, _mm256_maddubs_epi16(u, s), sc);
}

// One block of activations on 16 lanes: matmul_quant_avx2.cpp's
// quantize_block, the same operations in the same rule.
float quantize_block(const float* x, int64_t n, int8_t* q) {
  const __m512 smallest = _mm512_set1_ps(FLT_MIN);
  __m512 amax = _mm512_setzero_ps();
  for (int64_t i = 0; i < n; i += 16) {
    const __m512 a = _mm512_abs_ps(_mm512_loadu_ps(x + i));
    amax = _mm512_max_ps(amax, _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(a, smallest, _CMP_GE_OQ), a));
  }
  const float max = _mm512_reduce_max_ps(amax);
  const __m512 id = _mm512_set1_ps(max > 0.0f ? 127.0f / max : 0.0f);
  const __m512 lo = _mm512_set1_ps(-127.0f), hi = _mm512_set1_ps(127.0f), magic = _mm512_set1_ps(12582912.f);
  const __m512i low23 = _mm512_set1_epi32(0x007fffff), bias = _mm512_set1_epi32(0x00400000);
  for (int64_t i = 0; i < n; i += 16) {
    const __m512 v = _mm512_mul_ps(_mm512_loadu_ps(x + i), id);
    const __m512 c = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(v, v, _CMP_ORD_Q), _mm512_min_ps(_mm512_max_ps(v, lo), hi));
    const __m512i level = _mm512_sub_epi32(_mm512_and_si512(_mm512_castps_si512(_mm512_add_ps(c, magic)), low23), bias);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + i), _mm512_cvtepi32_epi8(level));
  }
  return activation_block_scale(n, max);
}

// The sum of v's 16 int8 lanes (integers: exact in any order).
inline int16_t sum16_of(__m128i v) { return static_cast<int16_t>(_mm512_reduce_add_epi32(_mm512_cvtepi8_epi32(v))); }

}  // namespace

}  // namespace sb::cpu::quant_vnni

#define SB_QUANT_NS quant_vnni
#include "runtime/cpu/quant_simd.inc"
#undef SB_QUANT_NS
SB_ISA_TARGET_END
#endif
