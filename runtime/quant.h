// The block-quantized weight formats (GGML's Q8_0, Q4_0, Q5_0, Q5_1, Q2_K,
// Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS)
// and their activations (docs/kernels.md "Quantized weights").
//
// Weights: quantize_row is the reference quantizer llama-quantize runs for
// each type without an importance matrix, giving the same bytes for the same
// floats; dequantize_row gives the bits of gguf-py's dequantize (and of
// ggml's dequantize_row_*). Both are plain scalar code: conversion and tests,
// not the decode path.
//
// Activations: each row of a product's input is quantized once to int8 in
// blocks (QuantizedRows) and the products run on integers; quant_dot_ref is
// the one definition of a product's bits, which every kernel variant
// (runtime/cpu/matmul_quant.cpp) reproduces exactly. Pure functions: any
// thread.
#pragma once

#include <cstdint>
#include <vector>

#include "common/status.h"
#include "runtime/dtype.h"

namespace sb {

// The block layouts, byte for byte as in a GGUF file (halves little endian).
struct BlockQ8_0 {
  uint16_t d;     // f16 scale
  int8_t qs[32];  // value i = d * qs[i]
};
struct BlockQ4_0 {
  uint16_t d;      // f16 scale
  uint8_t qs[16];  // value i = d * (nibble i - 8); low nibbles are 0-15, high 16-31
};
// Q5_0 and Q5_1: 5-bit levels n (nibble i of qs as Q4_0's, bit i of qh the
// fifth); llama-quantize's fallback for Q4_K / Q5_K rows that are not whole
// super-blocks.
struct BlockQ5_0 {
  uint16_t d;      // f16 scale; value i = d * (n_i - 16)
  uint8_t qh[4];   // bit i (little endian): the fifth bit of level i
  uint8_t qs[16];  // low four bits, as Q4_0
};
struct BlockQ5_1 {
  uint16_t d, m;  // f16 scale and min; value i = d * n_i + m
  uint8_t qh[4];
  uint8_t qs[16];
};
// K types: super-blocks of 256.
constexpr int kSuperBlock = 256;
struct BlockQ4_K {
  uint16_t d, dmin;    // f16 scales of the sub-block scales and mins
  uint8_t scales[12];  // eight 6-bit scales and eight 6-bit mins (kscale_min)
  uint8_t qs[128];     // per 64 values: 32 bytes, low nibbles the first 32, high the next 32
};
struct BlockQ5_K {
  uint16_t d, dmin;
  uint8_t scales[12];
  uint8_t qh[32];   // bit 2j of byte l: the fifth bit of value 64j + l; bit 2j+1: of 64j + 32 + l
  uint8_t qs[128];  // the low four bits, as Q4_K
};
struct BlockQ6_K {
  uint8_t ql[128];    // low four bits
  uint8_t qh[64];     // high two bits
  int8_t scales[16];  // one per 16 values
  uint16_t d;         // f16
};
// Q2_K and Q3_K: sixteen sub-blocks of 16 values. Value e = 128h + 32g + l
// (h < 2, g < 4, l < 32) has its two low bits at bits 2g of qs[32h + l].
struct BlockQ2_K {
  uint8_t scales[16];  // sub-block s: its 4-bit scale in the low nibble, its 4-bit min in the high
  uint8_t qs[64];      // value = d * scale_s * n - dmin * min_s, n in [0, 3]
  uint16_t d, dmin;    // f16
};
struct BlockQ3_K {
  uint8_t hmask[32];   // bit j of byte l: the third bit of value 32j + l
  uint8_t qs[64];      // the low two bits, as Q2_K; value = d * (scale_s - 32) * (n - 4), n in [0, 7]
  uint8_t scales[12];  // sixteen 6-bit scales (q3k_scale)
  uint16_t d;          // f16
};
// The IQ4 types: each 4-bit level n indexes a fixed table of 16 int8 values
// (kIq4Values, GGML's kvalues_iq4nl); nibbles as Q4_0's in each 32 values.
struct BlockIQ4_NL {
  uint16_t d;      // f16 scale; value i = d * kIq4Values[n_i]
  uint8_t qs[16];
};
struct BlockIQ4_XS {  // a super-block of 256: eight sub-blocks of 32
  uint16_t d;            // f16; value = d * (scale_s - 32) * kIq4Values[n]
  uint16_t scales_h;     // bits 2s and 2s + 1: the high two bits of sub-block s's 6-bit scale
  uint8_t scales_l[4];   // nibble s (low nibble of byte s / 2 first): its low four bits
  uint8_t qs[128];       // sub-block s at 16s, as an IQ4_NL block's
};
extern const int8_t kIq4Values[16];
static_assert(sizeof(BlockQ2_K) == 84 && sizeof(BlockQ3_K) == 110 && sizeof(BlockIQ4_NL) == 18 &&
              sizeof(BlockIQ4_XS) == 136);
static_assert(sizeof(BlockQ8_0) == 34 && sizeof(BlockQ4_0) == 18 && sizeof(BlockQ5_0) == 22 &&
              sizeof(BlockQ5_1) == 24 && sizeof(BlockQ4_K) == 144 && sizeof(BlockQ5_K) == 176 &&
              sizeof(BlockQ6_K) == 210);

// Sub-block j's 6-bit scale and min (j < 8) of a Q4_K or Q5_K block.
void kscale_min(const uint8_t* scales, int j, int* scale, int* min);

// Sub-block j's 6-bit scale (j < 16, before its offset of 32) of a Q3_K
// block's 12 scale bytes; sub-block j's (j < 8) of an IQ4_XS block.
int q3k_scale(const uint8_t* scales, int j);
int iq4xs_scale(const uint8_t* block, int j);

// A block's levels n into n[block elems] (Q8_0's signed, the others
// unsigned, before their offset: Q4_0 n - 8, Q5_0 n - 16, Q6_K n - 32,
// Q3_K n - 4; the IQ4 types' are indices into kIq4Values).
void block_levels(DType dtype, const uint8_t* block, int* n);

// Errors when dtype is not block-quantized or n is not a multiple of its block.
Status check_quant_row(DType dtype, int64_t n);
// out (dtype_row_bytes(dtype, n) bytes) = llama.cpp's reference quantization
// of x[n]. Errors on a NaN or an infinity.
Status quantize_row(DType dtype, const float* x, int64_t n, void* out);
// out[n] = the values of the row's blocks (dtype_row_bytes(dtype, n) bytes at in).
Status dequantize_row(DType dtype, const void* in, int64_t n, float* out);

// Activation rows quantized for products with `weight` blocks: per block of
// B values (32 for Q8_0/Q4_0/Q5_0/Q5_1/IQ4_NL, 256 for the K types and IQ4_XS), the levels
// q = round-half-even(x * (127 / amax)) in [-127, 127] (0 for a block of
// zeros), the scale d of activation_block_scale, the sums of q over each 16
// values (what the offsets and mins of the weights multiply) and the sums of
// |q| (which bound any product's sum over those 16: the repacked tiles scale
// two sums in 16 bits where they fit). Quantized
// once per product on the calling thread: a row's bits depend on the row alone.
struct QuantizedRows {
  DType weight = DType::kQ8_0;
  int64_t rows = 0, cols = 0, block = 32;
  std::vector<int8_t> q;      // [rows][cols]
  std::vector<float> d;       // [rows][cols / block]
  std::vector<int16_t> sums;        // [rows][cols / 16]
  std::vector<int16_t> magnitudes;  // [rows][cols / 16]
  const int8_t* row_q(int64_t r) const { return q.data() + r * cols; }
  const float* row_d(int64_t r) const { return d.data() + r * (cols / block); }
  const int16_t* row_sums(int64_t r) const { return sums.data() + r * (cols / 16); }
  const int16_t* row_magnitudes(int64_t r) const { return magnitudes.data() + r * (cols / 16); }
  // Sizes the buffers for rows x cols values against `weight` blocks.
  void reset(DType weight, int64_t rows, int64_t cols);
  // Quantizes rows [r0, r1) from x (row r0 first); rows are independent, so
  // ranges may run on different threads.
  void quantize(const float* x, int64_t r0, int64_t r1);
};
// The scale of an activation block whose largest magnitude is amax, as
// llama.cpp's x86 CPU build computes it, so that the same file gives the same
// products: for blocks of 32 (its q8_0) amax / 127 rounded to the nearest f16
// (the block's scale is stored as f16 there; above 65504 it is infinite, as
// there); for the K types' blocks of 256 (its q8_K) 1 / (127 / amax) in f32.
// 0 when amax is 0. Under the kernels' float mode.
float activation_block_scale(int64_t block, float amax);

// REQUIRES: check_quant_row(weight, cols) ok.
void quantize_rows(DType weight, const float* x, int64_t rows, int64_t cols, QuantizedRows* out);

// The product of weight row w (cols values of type dtype) and activation row
// r, the bits every kernel gives. Per block b in ascending order (the block
// of 32 for Q8_0/Q4_0/Q5_0/Q5_1/IQ4_NL, the super-block of 256 for the K
// types and IQ4_XS),
// an exact integer I_b and
//   Q8_0:  I = sum w_i q_i;                         y = fma(d_w * d_x, float(I), y)
//   Q4_0:  I = sum (n_i - 8) q_i;                   y = fma(d_w * d_x, float(I), y)
//   Q5_0:  I = sum (n_i - 16) q_i;                  y = fma(d_w * d_x, float(I), y)
//   Q5_1:  I = sum n_i q_i, S = sum q_i;            y = fma(d_w * d_x, float(I), y); y = fma(m_w * d_x, float(S), y)
//   Q4_K, Q5_K: I = sum_s sc_s sum n_i q_i, M = sum_s m_s sum q_i (sub-blocks s of 32);
//          y = fma(d * d_x, float(I), y); y = fma(-(dmin * d_x), float(M), y)
//   Q6_K:  I = sum_s sc_s sum (n_i - 32) q_i (sub-blocks of 16); y = fma(d * d_x, float(I), y)
//   Q2_K:  I = sum_s sc_s sum n_i q_i, M = sum_s m_s sum q_i (sub-blocks of 16);
//          y = fma(d * d_x, float(I), y); y = fma(-(dmin * d_x), float(M), y)
//   Q3_K:  I = sum_s (sc_s - 32) sum (n_i - 4) q_i (sub-blocks of 16); y = fma(d * d_x, float(I), y)
//   IQ4_NL: I = sum v(n_i) q_i (v = kIq4Values); y = fma(d_w * d_x, float(I), y)
//   IQ4_XS: I = sum_s (sc_s - 32) sum v(n_i) q_i (sub-blocks of 32); y = fma(d * d_x, float(I), y)
// starting from y = +0, under the kernels' float mode (subnormals flushed).
float quant_dot_ref(DType dtype, const void* w, const QuantizedRows& x, int64_t r);

}  // namespace sb
