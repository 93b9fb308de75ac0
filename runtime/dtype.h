// DType: the element types a checkpoint tensor or a state component is
// stored in, and the conversions between the 16-bit float formats and f32.
// One definition for the checkpoint reader and writer (model/), the kernels
// (runtime/cpu/) and the state schema.
//
// Conversions are exact where the target holds the value (bf16/f16 -> f32
// always); narrowing rounds to nearest even, keeps NaN a (quiet) NaN and the
// sign, and overflows to infinity. Pure functions: any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace sb {

enum class DType : uint8_t { kF32 = 1, kBF16 = 2, kF16 = 3 };

size_t dtype_size(DType dtype);
const char* dtype_name(DType dtype);  // "f32", "bf16", "f16"

// bf16 is the top half of an f32: widening is a shift (inline: the kernels'
// scalar paths use it per element).
inline float bf16_to_f32(uint16_t v) {
  const uint32_t bits = static_cast<uint32_t>(v) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}
uint16_t f32_to_bf16(float v);
float f16_to_f32(uint16_t v);
uint16_t f32_to_f16(float v);

}  // namespace sb
