// The quantized products' row kernels (runtime/quant.h defines their bits):
// the scalar reference and two SIMD variants that give the same bits, since
// each block's integer sums are exact in any order and the float fold of
// quant_dot_ref runs per output element in block order in all three.
//
//   avx2:        vpmaddubsw + vpmaddwd (the pair sums stay below 2^15)
//   avx512vnni:  vpdpbusd (four u8 x s8 products per lane)
// The weights' levels are the unsigned operand (Q8_0's as |w| with the
// activation's sign flipped where w < 0), the activations the signed one.
#pragma once

#include <cstdint>

#include "runtime/quant.h"

namespace sb::cpu {

enum class QuantIsa : uint8_t { kAuto, kScalar, kAvx2, kAvx512Vnni };
const char* quant_isa_name(QuantIsa isa);
// The fastest variant this CPU runs (kAvx512Vnni needs AVX512 F, BW, VL and VNNI).
QuantIsa quant_isa_best();
bool quant_isa_supported(QuantIsa isa);

// y[r * ldy] for the activation rows [i0, i0 + rows) of x (rows <= kQuantTileRows)
// against one weight row w of x.cols values of dtype: quant_dot_ref's bits.
constexpr int kQuantTileRows = 4;
using QuantRowKernel = void (*)(DType dtype, const uint8_t* w, const QuantizedRows& x, int64_t i0, int rows, float* y,
                                int64_t ldy);
QuantRowKernel quant_row_kernel(QuantIsa isa);

// For tests and benches: which variant the CPU kernels' products run
// (kAuto: quant_isa_best()); the same bits whichever.
void force_quant_isa(QuantIsa isa);
QuantIsa quant_isa_in_use();

// Test-only: while set to a quantized type, that type's SIMD kernel folds
// the blocks of a tile of several rows in descending order, a reduction
// order that depends on the batch, which the invariance and reference tests
// must catch. kF32: none (the default).
void set_quant_mutation(DType dtype);
DType quant_mutation();

namespace quant_avx2 {
void rows(DType dtype, const uint8_t* w, const QuantizedRows& x, int64_t i0, int rows, float* y, int64_t ldy);
}
namespace quant_vnni {
void rows(DType dtype, const uint8_t* w, const QuantizedRows& x, int64_t i0, int rows, float* y, int64_t ldy);
}

}  // namespace sb::cpu
