// The quantized row kernels on AVX2 (quant_kernels.h): vpmaddubsw forms the
// sums of two u8 x s8 products in 16 bits (at most 2 * 128 * 127 < 2^15 for
// every level range here, so never saturating) and vpmaddwd adds pairs of
// them times the scale into 32 bits.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "runtime/cpu/quant_kernels.h"

#if defined(__x86_64__)
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#include <immintrin.h>

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
}  // namespace
}  // namespace sb::cpu::quant_avx2

#define SB_QUANT_NS quant_avx2
#include "runtime/cpu/quant_simd.inc"
#undef SB_QUANT_NS
#pragma GCC pop_options
#endif
