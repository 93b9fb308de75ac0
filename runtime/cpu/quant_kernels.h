// The quantized products' tile kernels (runtime/quant.h defines their bits):
// the scalar reference and two SIMD variants that give the same bits, since
// each block's integer sums are exact in any order and the float fold of
// quant_dot_ref runs per output element in block order in all three.
//
//   avx2:        vpmaddubsw + vpmaddwd (the pair sums stay below 2^15)
//   avx512vnni:  vpdpbusd (four u8 x s8 products per lane) for Q8_0, Q4_0,
//                Q5_0, Q5_1 and IQ4_NL; vpmaddubsw + vpdpwssd for the K types'
//                and IQ4_XS's scaled sums
// A file-layout tile computes 8 output features in the lanes of one float
// vector (a repacked one 16), so that the fold of each element is one lane's
// chain of fmas.
// The weights' levels are the unsigned operand (Q8_0's and the IQ4 types'
// table values as |w| with the activation's sign flipped where w < 0), the
// activations the signed one.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "runtime/kernels.h"
#include "runtime/quant.h"
#include "runtime/threads.h"

namespace sb::cpu {

enum class QuantIsa : uint8_t { kAuto, kScalar, kAvx2, kAvx512Vnni };
const char* quant_isa_name(QuantIsa isa);
// The fastest variant this CPU runs (kAvx512Vnni needs AVX512 F, BW, VL and VNNI).
QuantIsa quant_isa_best();
bool quant_isa_supported(QuantIsa isa);

// A tile of the product: y[r * ldy + c] for the activation rows
// [i0, i0 + rows) of x (rows <= kQuantTileRows) and the weight rows
// w + c * row_bytes, c < cols <= kQuantTileCols, each x.cols values of
// dtype: quant_dot_ref's bits.
constexpr int kQuantTileRows = 4, kQuantTileCols = 8;
using QuantTileKernel = void (*)(DType dtype, const uint8_t* w, int64_t row_bytes, int cols, const QuantizedRows& x,
                                 int64_t i0, int rows, float* y, int64_t ldy);

// The order a tile folds its blocks in, fixed when a kernel is compiled:
// kReference is quant_dot_ref's, the only one the product runs;
// kReversedInTiles folds the blocks of a tile of several rows backwards, an
// order that depends on the batch, which the invariance and reference tests
// must catch. Kernels with it are made by test code alone
// (tests/util/mutated_kernels.h hands them to CpuKernels).
enum class BlockOrder : uint8_t { kReference, kReversedInTiles };
QuantTileKernel quant_tile_kernel(QuantIsa isa, BlockOrder order = BlockOrder::kReference);

// The repacked layout of Q8_0, Q4_0, Q3_K, Q4_K, Q5_K, Q6_K and IQ4_XS for
// AVX512-VNNI (matmul_quant_packed.cpp, made by prepare()): groups of
// kQuantPackedRows weight rows.
constexpr int kQuantPackedRows = 16, kQuantPackedTileRows = 8;
// Steps of up to this many rows run every part of a product in one parallel
// region, their activations quantized on the calling thread
// (CpuKernels::matmul_quant_few): a decode or verify step's handful of rows
// is a few microseconds of quantizing, less than a hand-off to the pool.
constexpr int64_t kQuantFewRows = 16;
bool quant_packs(DType dtype);
int64_t quant_packed_group_bytes(DType dtype, int64_t cols);
// What the packed tiles of dtype read beside x, the levels' offsets times
// the activations' sums, where each integer sum starts (a broadcast from
// memory; a vpdpwssd per row cost a tenth of a tile of 8 rows): for Q6_K
// -32 and for Q3_K -4 times each of x's sums of 16, for Q8_0 and IQ4_XS -128
// and for Q4_0 -8 times each sum of 32; for Q4_K, not an offset, each two
// consecutive sums of 32 as one 16-bit pair (the first low), the operand of
// the mins' product; empty for the other types. For Q4_K and Q6_K each row's
// entries end with one per block of 256: 1 where the block's sums of 32
// (Q4_K) or 16 (Q6_K) times any weight level fit 16 bits, so that the tiles
// scale two sub-blocks' sums with one vpdpwssd, else 0.
std::vector<int32_t> quant_packed_offsets(DType dtype, const QuantizedRows& x);
// The entries per row of quant_packed_offsets(dtype, x) for x.cols == cols.
int64_t quant_packed_offsets_per_row(DType dtype, int64_t cols);
// y[r * ldy + c] for c < cols of one group and rows <= kQuantPackedTileRows
// activation rows, offsets = quant_packed_offsets(dtype, x).data(): the bits
// of the other kernels.
void quant_packed_tile(DType dtype, const uint8_t* group, const QuantizedRows& x, const int32_t* offsets, int64_t i0,
                       int rows, float* y, int64_t ldy, int cols);
using QuantPackedTileKernel = void (*)(DType dtype, const uint8_t* group, const QuantizedRows& x,
                                       const int32_t* offsets, int64_t i0, int rows, float* y, int64_t ldy, int cols);
QuantPackedTileKernel quant_packed_tile_kernel(BlockOrder order = BlockOrder::kReference);
void quant_packed_tile_reversed(DType dtype, const uint8_t* group, const QuantizedRows& x, const int32_t* offsets,
                                int64_t i0, int rows, float* y, int64_t ldy, int cols);

// Rows [r0, r1) of x (row r0 first) quantized into xq (sized by
// xq->reset) with QuantizedRows::quantize's bits by a variant: kScalar is
// that reference, kAvx2 8 lanes, kAvx512Vnni 16 (AVX512 F and BW). The same
// rounding rule throughout: the block's amax ignores NaN and reads subnormals
// as zero, each level is round-half-even of the clamped x * (127 / amax), a
// NaN's level 0.
void quantize_activations(QuantIsa isa, const float* x, int64_t r0, int64_t r1, QuantizedRows* xq);

// For tests and benches: which variant the CPU kernels' products run
// (kAuto: quant_isa_best()); the same bits whichever.
void force_quant_isa(QuantIsa isa);
QuantIsa quant_isa_in_use();

// w repacked (REQUIRES quant_packs(w.dtype)), on the pool's threads.
std::shared_ptr<const PackedWeight> pack_quant(const WeightRef& w, ThreadPool* pool);

namespace quant_avx2 {
void quantize_rows(const float* x, int64_t r0, int64_t r1, QuantizedRows* xq);
void tile(DType dtype, const uint8_t* w, int64_t row_bytes, int cols, const QuantizedRows& x, int64_t i0, int rows,
          float* y, int64_t ldy);
void tile_reversed(DType dtype, const uint8_t* w, int64_t row_bytes, int cols, const QuantizedRows& x, int64_t i0,
                   int rows, float* y, int64_t ldy);
}  // namespace quant_avx2
namespace quant_vnni {
void quantize_rows(const float* x, int64_t r0, int64_t r1, QuantizedRows* xq);
void tile(DType dtype, const uint8_t* w, int64_t row_bytes, int cols, const QuantizedRows& x, int64_t i0, int rows,
          float* y, int64_t ldy);
void tile_reversed(DType dtype, const uint8_t* w, int64_t row_bytes, int cols, const QuantizedRows& x, int64_t i0,
                   int rows, float* y, int64_t ldy);
}  // namespace quant_vnni

}  // namespace sb::cpu
