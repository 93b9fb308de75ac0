// The two roundings of the bf16 precision (runtime/kernels.h, Precision),
// defined once here so that every path gives the same bits:
//  - to_bf16: fp32 -> bf16, round to nearest even, subnormals to signed zero,
//    NaN kept a quiet NaN. Inputs of a bf16 product are rounded with it, so no
//    product ever sees a subnormal operand.
//  - dp_pair: one lane of vdpbf16ps, acc + x1*w1 then + x0*w0, each an fp32
//    fused multiply-add whose subnormal result is flushed to signed zero (the
//    instruction reads subnormal inputs as zero too; our inputs have none).
//    Measured bit-exact against the instruction on 32 million random lanes,
//    subnormal-range products included (docs/kernels.md).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace sb::cpu {

inline uint16_t to_bf16(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  const uint32_t exp = u & 0x7f800000u;
  if (exp == 0) return static_cast<uint16_t>((u >> 16) & 0x8000u);
  if (exp == 0x7f800000u) return static_cast<uint16_t>((u >> 16) | ((u & 0x7fffffu) ? 0x40u : 0u));
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

inline float bf16_value(uint16_t h) {
  const uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline float flush_subnormal(float x) { return std::fabs(x) < 0x1p-126f ? std::copysign(0.0f, x) : x; }

// pair: bf16 element 0 in the low half, element 1 in the high half.
inline float dp_pair(float acc, uint32_t x_pair, uint32_t w_pair) {
  acc = flush_subnormal(std::fma(bf16_value(static_cast<uint16_t>(x_pair >> 16)),
                                 bf16_value(static_cast<uint16_t>(w_pair >> 16)), acc));
  return flush_subnormal(std::fma(bf16_value(static_cast<uint16_t>(x_pair)), bf16_value(static_cast<uint16_t>(w_pair)),
                                  acc));
}

// Rounds rows of x [m, k] to bf16 rows of `ld` elements (ld even, >= k), the
// padding zero.
void round_rows_to_bf16(const float* x, int64_t m, int64_t k, uint16_t* out, int64_t ld);

}  // namespace sb::cpu
