// The quantized row kernels on AVX512-VNNI (quant_kernels.h): vpdpbusd on
// 256-bit vectors, four u8 x s8 products summed into each 32-bit lane, then
// the lane times its scale.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "runtime/cpu/quant_kernels.h"

#if defined(__x86_64__)
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")
#include <immintrin.h>

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
}  // namespace
}  // namespace sb::cpu::quant_vnni

#define SB_QUANT_NS quant_vnni
#include "runtime/cpu/quant_simd.inc"
#undef SB_QUANT_NS
#pragma GCC pop_options
#endif
