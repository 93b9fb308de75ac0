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

// The block-quantized types are GGML's (a row is a sequence of blocks, each a
// scale or two and packed integers; docs/kernels.md): their values are what
// GGUF files hold and what statebank quantize writes. The numbers are stored
// in fingerprints and state schemas: never renumber.
enum class DType : uint8_t {
  kF32 = 1,
  kBF16 = 2,
  kF16 = 3,
  kQ8_0 = 4,
  kQ4_0 = 5,
  kQ4_K = 6,
  kQ5_K = 7,
  kQ6_K = 8,
  kQ5_0 = 9,
  kQ5_1 = 10,
  kQ2_K = 11,
  kQ3_K = 12,
  kIQ4_NL = 13,
  kIQ4_XS = 14,
  // Integers a checkpoint holds beside its weights (qwen4exp's n-gram hash
  // constants); never a weight's type. Far from the block types' numbers.
  kI64 = 32
};

// A block-quantized type's block: `elems` values in `bytes` bytes. Element
// types are blocks of one.
struct DTypeBlock {
  int64_t elems = 1;
  int64_t bytes = 0;
};
// Bytes of one element; 0 for the block-quantized types (dtype_row_bytes).
// Inline, as dtype_block: a prefill's packed products asked for a block's
// size once per tile, and the call cost 1.5-3% of a 0.8b prefill step's
// samples (docs/kernels.md).
constexpr size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::kF32: return 4;
    case DType::kBF16: return 2;
    case DType::kF16: return 2;
    case DType::kI64: return 8;
    default: return 0;
  }
}
constexpr DTypeBlock dtype_block(DType dtype) {
  switch (dtype) {
    case DType::kQ8_0: return {32, 34};    // f16 scale, 32 int8
    case DType::kQ4_0: return {32, 18};    // f16 scale, 32 4-bit
    case DType::kQ5_0: return {32, 22};    // f16 scale, 32 fifth bits, 32 4-bit
    case DType::kQ5_1: return {32, 24};    // f16 scale and min, 32 fifth bits, 32 4-bit
    case DType::kQ4_K: return {256, 144};  // f16 d, dmin, 12 bytes of 6-bit scales/mins, 128 bytes of 4-bit
    case DType::kQ5_K: return {256, 176};  // as Q4_K plus 32 bytes of high bits
    case DType::kQ6_K: return {256, 210};  // 128 low 4-bit, 64 high 2-bit, 16 int8 scales, f16 d
    case DType::kQ2_K: return {256, 84};   // 16 4-bit scale/min pairs, 64 bytes of 2-bit, f16 d, dmin
    case DType::kQ3_K: return {256, 110};  // 32 bytes of high bits, 64 of low 2-bit, 12 of 6-bit scales, f16 d
    case DType::kIQ4_NL: return {32, 18};  // f16 scale, 32 4-bit indices into a 16-value table
    case DType::kIQ4_XS: return {256, 136}; // f16 d, 8 6-bit scales (2 + 4 bytes), 128 bytes of 4-bit indices
    default: return {1, static_cast<int64_t>(dtype_size(dtype))};
  }
}
constexpr bool dtype_is_quantized(DType dtype) { return dtype_block(dtype).elems > 1; }
// Bytes of a row of `cols` values; cols must be a multiple of the block's elems.
constexpr int64_t dtype_row_bytes(DType dtype, int64_t cols) {
  const DTypeBlock b = dtype_block(dtype);
  return cols / b.elems * b.bytes;
}

const char* dtype_name(DType dtype);  // "f32", "bf16", "f16", "q8_0", "q4_0", "q4_k", "q5_k", "q6_k",
                                      // "q5_0", "q5_1", "q2_k", "q3_k", "iq4_nl", "iq4_xs"

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
