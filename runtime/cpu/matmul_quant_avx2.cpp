// The quantized row kernels on AVX2 (quant_kernels.h): vpmaddubsw forms the
// sums of two u8 x s8 products in 16 bits (at most 2 * 128 * 127 < 2^15 for
// every level range here, so never saturating) and vpmaddwd adds pairs of
// them times the scale into 32 bits.
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
SB_ISA_TARGET_BEGIN("avx2,fma,f16c")

namespace sb::cpu::quant_avx2 {
namespace {
using Scales = __m256i;
inline Scales make_scales(int lo, int hi) {
  return _mm256_set_m128i(_mm_set1_epi16(static_cast<int16_t>(hi)), _mm_set1_epi16(static_cast<int16_t>(lo)));
}
inline __m256i plain_dot(__m256i u, __m256i s) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
}
inline __m256i scaled_dot_add(__m256i acc, __m256i u, __m256i s, Scales sc) {
  return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), sc));
}

// One block of activations (quant_kernels.h's rule, QuantizedRows::quantize's
// bits): |x| below the smallest normal (or NaN) counts as 0 in amax, as the
// reference's comparisons read it under DAZ; max_ps(v, lo) gives lo for a NaN
// v, which the ordered mask then zeroes.
float quantize_block(const float* x, int64_t n, int8_t* q) {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff)), smallest = _mm256_set1_ps(FLT_MIN);
  __m256 amax = _mm256_setzero_ps();
  for (int64_t i = 0; i < n; i += 8) {
    const __m256 a = _mm256_and_ps(_mm256_loadu_ps(x + i), abs_mask);
    amax = _mm256_max_ps(amax, _mm256_and_ps(a, _mm256_cmp_ps(a, smallest, _CMP_GE_OQ)));
  }
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(amax), _mm256_extractf128_ps(amax, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_shuffle_ps(m, m, 1));
  const float max = _mm_cvtss_f32(m);
  const __m256 id = _mm256_set1_ps(max > 0.0f ? 127.0f / max : 0.0f);
  const __m256 lo = _mm256_set1_ps(-127.0f), hi = _mm256_set1_ps(127.0f), magic = _mm256_set1_ps(12582912.f);
  const __m256i low23 = _mm256_set1_epi32(0x007fffff), bias = _mm256_set1_epi32(0x00400000);
  auto levels = [&](const float* p) {
    const __m256 v = _mm256_mul_ps(_mm256_loadu_ps(p), id);
    const __m256 c = _mm256_and_ps(_mm256_min_ps(_mm256_max_ps(v, lo), hi), _mm256_cmp_ps(v, v, _CMP_ORD_Q));
    return _mm256_sub_epi32(_mm256_and_si256(_mm256_castps_si256(_mm256_add_ps(c, magic)), low23), bias);
  };
  for (int64_t i = 0; i < n; i += 32) {
    const __m256i a = levels(x + i), b = levels(x + i + 8), c = levels(x + i + 16), d = levels(x + i + 24);
    const __m256i bytes = _mm256_packs_epi16(_mm256_packs_epi32(a, b), _mm256_packs_epi32(c, d));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + i),
                        _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
  }
  return activation_block_scale(n, max);
}

// The sum of v's 16 int8 lanes (integers: exact in any order).
inline int16_t sum16_of(__m128i v) {
  __m128i s = _mm_madd_epi16(_mm_add_epi16(_mm_cvtepi8_epi16(v), _mm_cvtepi8_epi16(_mm_srli_si128(v, 8))),
                             _mm_set1_epi16(1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
  return static_cast<int16_t>(_mm_cvtsi128_si32(s));
}

}  // namespace

}  // namespace sb::cpu::quant_avx2

#define SB_QUANT_NS quant_avx2
#include "runtime/cpu/quant_simd.inc"
#undef SB_QUANT_NS
SB_ISA_TARGET_END
#endif
