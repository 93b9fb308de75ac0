// Q8_0, Q4_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K and IQ4_XS weights repacked at load for AVX512-VNNI
// (Kernels::prepare): 16 weight rows side by side, so that one vpdpbusd of a
// broadcast group of four activation levels gives each row's partial sum in
// its own lane. No horizontal sums remain, and a block's fold
// (quant_dot_ref) runs on the 16 rows' lanes at once; the bits are those of
// the file-layout kernels.
//
// Layout, per group of 16 weight rows (a last group padded with zero rows),
// per block in order; "16 x" is one value per row of the group:
//   Q8_0 (544 bytes): 16 x f16 scale; then for each 4 levels k < 8 of the
//        block, 16 lanes of 4 bytes (row c's levels 4k..4k+3, each + 128 so
//        that they are the unsigned operand; the product's excess is 128
//        times the activations' block sum, which they carry).
//   Q4_0 (288 bytes): 16 x f16 scale; 4 x 64 bytes of nibbles (lane c byte t
//        of the k-th: level 8k + t low, 8k + 4 + t high).
//   Q4_K: 16 x f16 d, 16 x f16 dmin, the 6-bit scales and the mins, a byte
//        each, as [4][16][2] bytes each (pair t of lane c: sub-blocks 2t and
//        2t + 1, one 16-bit pair each for vpdpwssd). Then per pair t of
//        sub-blocks, 8 x 64 bytes of nibbles: lane c byte i of the k-th holds
//        level 4k + i of sub-block 2t low and of sub-block 2t + 1 high, so
//        that one AND each (0x0F, 0xF0) gives the two operands; the high
//        one's sums are 16 times the level's, divided out once per block.
//   Q5_K: 16 x f16 d, 16 x f16 dmin, [8][16] 6-bit scales and [8][16]
//        mins, a byte each. Then per sub-block s of 32 levels: 4 x 64 bytes
//        of nibbles (lane c byte t of the k-th: level 32s + 8k + t low,
//        32s + 8k + 4 + t high) and 64 bytes of fifth bits (bit 2k and
//        2k + 1 of lane c byte t: the k-th chunk's two levels).
//   Q6_K: 16 x f16 d, [16][16] int8 scales. Then per sub-block s of 32
//        levels, 6 x 64 bytes: bits 0-5 of lane c byte t of the j-th hold
//        level 32s + 4j + t whole; bits 6-7 of the j-th hold bits
//        2(j % 3)..2(j % 3) + 1 of level 32s + 4(6 + j / 3) + t.
//   Q3_K: 16 x f16 d; [16][16] int8 scales (the file's 6-bit scale - 32, as
//        Q6_K's), then per sub-block s of 32 levels (0..7, the file's n + 4):
//        2 x 64 bytes of the low two bits (bits 2m..2m+1 of lane c byte t of
//        the h-th: level 32s + 4(4h + m) + t) and 64 bytes of the third bit
//        (bit j of lane c byte t: level 32s + 4j + t).
//   Q2_K: 16 x f16 d, 16 x f16 dmin, the file's scale-and-min bytes as
//        [8][16][2] (pair t of lane c: sub-blocks 2t and 2t + 1), then per
//        sub-block of 32 levels (0..3) Q3_K's two vectors of low bits.
//   IQ4_XS: 16 x f16 d; [8][16] int8 scales (the file's 6-bit scale - 32),
//        then per sub-block of 32 the table indices as Q6_K's low nibbles.
//   Sizes: Q2_K 1344, Q3_K 1824, IQ4_XS 2208, Q4_K 2368, Q5_K 2880, Q6_K 3360
//   bytes (the file's 16 x 84, 110, 136, 144, 176, 210 + 64; Q2_K + 0,
//   IQ4_XS + 32).
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>

#include "runtime/cpu/cpu_kernels.h"
#include "runtime/cpu/quant_kernels.h"

namespace sb::cpu {

namespace {

constexpr int64_t kLanes = kQuantPackedRows;

struct KLayout {
  int header, sub;  // bytes before the sub-blocks, bytes per sub-block
  int block() const { return header + 8 * sub; }
};
KLayout k_layout(DType dtype) {
  switch (dtype) {
    case DType::kQ5_K:
      return {320, 320};
    case DType::kQ6_K:
      return {288, 384};
    case DType::kQ3_K:
      return {288, 192};
    case DType::kIQ4_XS:
      return {160, 256};
    case DType::kQ2_K:
      return {320, 128};
    default:
      return {320, 256};
  }
}

int64_t block_bytes(DType dtype) {
  return dtype == DType::kQ8_0 ? 544 : dtype == DType::kQ4_0 ? 288 : k_layout(dtype).block();
}

void pack_q4_0_group(const uint8_t* rows[kLanes], int64_t nb, uint8_t* out) {
  for (int64_t b = 0; b < nb; ++b, out += 288) {
    std::memset(out, 0, 288);
    for (int c = 0; c < kLanes; ++c) {
      if (!rows[c]) continue;
      const uint8_t* blk = rows[c] + b * 18;
      std::memcpy(out + 2 * c, blk, 2);
      int lev[32];
      block_levels(DType::kQ4_0, blk, lev);
      for (int k = 0; k < 4; ++k)
        for (int t = 0; t < 4; ++t)
          out[32 + 64 * k + 4 * c + t] = static_cast<uint8_t>(lev[8 * k + t] | (lev[8 * k + 4 + t] << 4));
    }
  }
}

void pack_q8_0_group(const uint8_t* rows[kLanes], int64_t nb, uint8_t* out) {
  for (int64_t b = 0; b < nb; ++b, out += 544) {
    for (int c = 0; c < kLanes; ++c) {
      const uint8_t* blk = rows[c] ? rows[c] + b * 34 : nullptr;
      if (blk)
        std::memcpy(out + 2 * c, blk, 2);
      else
        std::memset(out + 2 * c, 0, 2);
      for (int e = 0; e < 32; ++e) out[32 + 64 * (e / 4) + 4 * c + e % 4] = blk ? blk[2 + e] ^ 0x80 : 0x80;
    }
  }
}

// Lane c's Q6_K levels (0..63) into the sub-blocks from `subs` on, `sub`
// bytes apart: level vector j < 6 of a sub-block in bits 0-5 of the j-th
// 64 bytes, level vectors 6 and 7 in bits 6-7 of vectors 0-2 and 3-5, two
// bits each, lowest first.
void pack_q6_k_levels(const int* lev, int c, uint8_t* subs, int sub) {
  for (int s = 0; s < 8; ++s)
    for (int j = 0; j < 8; ++j)
      for (int t = 0; t < 4; ++t) {
        const int e = lev[32 * s + 4 * j + t];
        uint8_t* at = subs + sub * s + 4 * c + t;
        if (j < 6) {
          at[64 * j] |= static_cast<uint8_t>(e);
        } else {
          for (int i = 0; i < 3; ++i) at[64 * (3 * (j - 6) + i)] |= static_cast<uint8_t>(((e >> (2 * i)) & 3) << 6);
        }
      }
}

// One row's K block into lane c of a packed block.
void pack_k_lane(DType dtype, const uint8_t* blk, int c, uint8_t* out) {
  const KLayout lay = k_layout(dtype);
  const bool six = dtype == DType::kQ6_K;
  std::memcpy(out + 2 * c, blk + (six ? 208 : 0), 2);
  if (six) {
    for (int s = 0; s < 16; ++s) out[32 + 16 * s + c] = blk[192 + s];
  } else if (dtype == DType::kIQ4_XS) {
    for (int s = 0; s < 8; ++s) out[32 + 16 * s + c] = static_cast<uint8_t>(static_cast<int8_t>(iq4xs_scale(blk, s) - 32));
  } else {
    std::memcpy(out + 32 + 2 * c, blk + 2, 2);
    for (int s = 0; s < 8; ++s) {
      int sc, mn;
      kscale_min(blk + 4, s, &sc, &mn);
      out[64 + 16 * s + c] = static_cast<uint8_t>(sc);
      out[192 + 16 * s + c] = static_cast<uint8_t>(mn);
    }
  }
  int lev[kSuperBlock];
  block_levels(dtype, blk, lev);
  if (six) return pack_q6_k_levels(lev, c, out + lay.header, lay.sub);
  for (int s = 0; s < 8; ++s) {
    uint8_t* sub = out + lay.header + lay.sub * s;
    for (int k = 0; k < 4; ++k)
      for (int t = 0; t < 4; ++t) {
        const int e0 = lev[32 * s + 8 * k + t], e1 = lev[32 * s + 8 * k + 4 + t];
        sub[64 * k + 4 * c + t] = static_cast<uint8_t>((e0 & 0xF) | ((e1 & 0xF) << 4));
        if (dtype == DType::kQ5_K)
          sub[256 + 4 * c + t] |= static_cast<uint8_t>(((e0 >> 4) << (2 * k)) | ((e1 >> 4) << (2 * k + 1)));
      }
  }
}

// Q3_K's levels are three bits: two fields (the low two bits, the third) that
// the tile joins with a shift, an AND and a masked add per level vector, so
// that the copy is 1.04x the file's bytes (nibbles would be 1.33x).
// Lane c's low two bits of each level (and Q3_K's third) in Q2_K's and Q3_K's layout.
void pack_low_bits_lane(DType dtype, const uint8_t* blk, int c, uint8_t* out) {
  int lev[kSuperBlock];
  block_levels(dtype, blk, lev);
  const KLayout lay = k_layout(dtype);
  for (int s = 0; s < 8; ++s) {
    uint8_t* sub = out + lay.header + lay.sub * s;
    for (int j = 0; j < 8; ++j)
      for (int t = 0; t < 4; ++t) {
        const int e = lev[32 * s + 4 * j + t];
        sub[64 * (j / 4) + 4 * c + t] |= static_cast<uint8_t>((e & 3) << (2 * (j % 4)));
        if (dtype == DType::kQ3_K) sub[128 + 4 * c + t] |= static_cast<uint8_t>(((e >> 2) & 1) << j);
      }
  }
}

void pack_q3_k_lane(const uint8_t* blk, int c, uint8_t* out) {
  std::memcpy(out + 2 * c, blk + 108, 2);
  for (int s = 0; s < 16; ++s) out[32 + 16 * s + c] = static_cast<uint8_t>(static_cast<int8_t>(q3k_scale(blk + 96, s) - 32));
  pack_low_bits_lane(DType::kQ3_K, blk, c, out);
}

void pack_q2_k_lane(const uint8_t* blk, int c, uint8_t* out) {
  std::memcpy(out + 2 * c, blk + 80, 2);
  std::memcpy(out + 32 + 2 * c, blk + 82, 2);
  for (int s = 0; s < 16; ++s) out[64 + 32 * (s / 2) + 2 * c + s % 2] = blk[s];
  pack_low_bits_lane(DType::kQ2_K, blk, c, out);
}

void pack_q4_k_lane(const uint8_t* blk, int c, uint8_t* out) {
  std::memcpy(out + 2 * c, blk, 2);
  std::memcpy(out + 32 + 2 * c, blk + 2, 2);
  for (int s = 0; s < 8; ++s) {
    int sc, mn;
    kscale_min(blk + 4, s, &sc, &mn);
    out[64 + 32 * (s / 2) + 2 * c + s % 2] = static_cast<uint8_t>(sc);
    out[192 + 32 * (s / 2) + 2 * c + s % 2] = static_cast<uint8_t>(mn);
  }
  int lev[kSuperBlock];
  block_levels(DType::kQ4_K, blk, lev);
  const KLayout lay = k_layout(DType::kQ4_K);
  for (int t = 0; t < 4; ++t)
    for (int k = 0; k < 8; ++k)
      for (int i = 0; i < 4; ++i)
        out[lay.header + 2 * lay.sub * t + 64 * k + 4 * c + i] =
            static_cast<uint8_t>(lev[64 * t + 4 * k + i] | (lev[64 * t + 32 + 4 * k + i] << 4));
}

void pack_k_group(DType dtype, const uint8_t* rows[kLanes], int64_t nb, uint8_t* out) {
  const int64_t in_bytes = dtype_block(dtype).bytes, bytes = block_bytes(dtype);
  for (int64_t b = 0; b < nb; ++b, out += bytes) {
    std::memset(out, 0, static_cast<size_t>(bytes));
    for (int c = 0; c < kLanes; ++c) {
      if (!rows[c]) continue;
      if (dtype == DType::kQ4_K)
        pack_q4_k_lane(rows[c] + b * in_bytes, c, out);
      else if (dtype == DType::kQ3_K)
        pack_q3_k_lane(rows[c] + b * in_bytes, c, out);
      else if (dtype == DType::kQ2_K)
        pack_q2_k_lane(rows[c] + b * in_bytes, c, out);
      else
        pack_k_lane(dtype, rows[c] + b * in_bytes, c, out);
    }
  }
}

}  // namespace

// Q5_0 and Q5_1 (llama-quantize's fallback for a few narrow tensors) run in
// the file's layout.
bool quant_packs(DType dtype) {
  switch (dtype) {
    case DType::kQ8_0:
    case DType::kQ4_0:
    case DType::kQ4_K:
    case DType::kQ5_K:
    case DType::kQ6_K:
    case DType::kQ2_K:
    case DType::kQ3_K:
    case DType::kIQ4_XS:
      return true;
    default:
      return false;  // Q5_0, Q5_1 and IQ4_NL run the file's layout
  }
}

namespace {

// Whether every group's sum of products with any weight levels fits 16 bits
// in an activation block of 256 levels, from its magnitudes per 16: Q4_K's
// groups of 32 against levels 0..15, Q6_K's of 16 against n - 32
// (-32..31), so that the group's magnitude times 15 (32) is at most 32767.
// A block of normal values comes to about half of that; one that holds
// near its largest level throughout does not fit.
bool pair_sums_fit(DType dtype, const int16_t* magnitudes) {
  for (int g = 0; g < kSuperBlock / 16; g += dtype == DType::kQ4_K ? 2 : 1) {
    const int bound = dtype == DType::kQ4_K ? 15 * (magnitudes[g] + magnitudes[g + 1]) : 32 * magnitudes[g];
    if (bound > 32767) return false;
  }
  return true;
}

// Whether quant_packed_offsets' rows end with their blocks' pair_sums_fit.
bool offsets_end_with_fits(DType dtype) { return dtype == DType::kQ4_K || dtype == DType::kQ6_K; }

}  // namespace

int64_t quant_packed_offsets_per_row(DType dtype, int64_t cols) {
  const int64_t fits = offsets_end_with_fits(dtype) ? cols / kSuperBlock : 0;
  switch (dtype) {
    case DType::kQ6_K:
    case DType::kQ3_K:
      return cols / 16 + fits;
    case DType::kQ4_K:
      return cols / 64 + fits;
    case DType::kQ8_0:
    case DType::kQ4_0:
    case DType::kIQ4_XS:
      return cols / 32;
    default:
      return 0;
  }
}

std::vector<int32_t> quant_packed_offsets(DType dtype, const QuantizedRows& x) {
  const int64_t per_row = quant_packed_offsets_per_row(dtype, x.cols), nb = x.cols / kSuperBlock;
  std::vector<int32_t> out(static_cast<size_t>(x.rows * per_row));
  for (int64_t r = 0; r < x.rows; ++r) {
    const int16_t* sums = x.row_sums(r);
    int32_t* row = out.data() + r * per_row;
    switch (dtype) {
      case DType::kQ6_K:
      case DType::kQ3_K:
        for (int64_t i = 0; i < x.cols / 16; ++i) row[i] = (dtype == DType::kQ6_K ? -32 : -4) * sums[i];
        break;
      case DType::kQ8_0:
      case DType::kQ4_0:
      case DType::kIQ4_XS:
        // IQ4_XS's table values are stored + 128 (the unsigned operand).
        for (int64_t i = 0; i < x.cols / 32; ++i)
          row[i] = (dtype == DType::kQ4_0 ? -8 : -128) * (sums[2 * i] + sums[2 * i + 1]);
        break;
      case DType::kQ4_K:
        // Not offsets: each pair of sub-blocks' two sums of 32 as one 16-bit
        // pair (|sum| <= 32 * 128), the operand of the mins' vpdpwssd.
        for (int64_t i = 0; i < x.cols / 64; ++i) {
          const int32_t lo = sums[4 * i] + sums[4 * i + 1], hi = sums[4 * i + 2] + sums[4 * i + 3];
          row[i] = static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint16_t>(lo)) |
                                        (static_cast<uint32_t>(static_cast<uint16_t>(hi)) << 16));
        }
        break;
      default:
        break;
    }
    if (offsets_end_with_fits(dtype))
      for (int64_t b = 0; b < nb; ++b) row[per_row - nb + b] = pair_sums_fit(dtype, x.row_magnitudes(r) + b * 16);
  }
  return out;
}

int64_t quant_packed_group_bytes(DType dtype, int64_t cols) {
  return cols / dtype_block(dtype).elems * block_bytes(dtype);
}

std::shared_ptr<const PackedWeight> pack_quant(const WeightRef& w, ThreadPool* pool) {
  const int64_t groups = (w.rows + kLanes - 1) / kLanes, group_bytes = quant_packed_group_bytes(w.dtype, w.cols);
  auto pw = std::make_shared<PackedWeight>(w.dtype, w.rows, w.cols, static_cast<size_t>(groups * group_bytes));
  const int64_t row_bytes = dtype_row_bytes(w.dtype, w.cols), nb = w.cols / dtype_block(w.dtype).elems;
  uint8_t* out = reinterpret_cast<uint8_t*>(pw->data);
  pool->parallel_for(groups, [&](int64_t g) {
    const uint8_t* rows[kLanes];
    for (int c = 0; c < kLanes; ++c) {
      const int64_t j = g * kLanes + c;
      rows[c] = j < w.rows ? static_cast<const uint8_t*>(w.data) + j * row_bytes : nullptr;
    }
    if (w.dtype == DType::kQ8_0)
      pack_q8_0_group(rows, nb, out + g * group_bytes);
    else if (w.dtype == DType::kQ4_0)
      pack_q4_0_group(rows, nb, out + g * group_bytes);
    else
      pack_k_group(w.dtype, rows, nb, out + g * group_bytes);
  });
  return pw;
}

}  // namespace sb::cpu

#if defined(__x86_64__)
#include <immintrin.h>

#include "runtime/cpu/isa_target.h"
SB_ISA_TARGET_BEGIN("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")

namespace sb::cpu {
namespace {

template <int R, BlockOrder kOrder>
struct PackedTile {
  static constexpr int kRows = R;
  static constexpr bool kReversed = kOrder == BlockOrder::kReversedInTiles && R > 1;
  const int8_t* q[R];
  const float* d[R];
  const int16_t* sums[R];
  const int32_t* offsets[R];  // quant_packed_offsets' rows
  const int32_t* fits[R];     // their blocks' pair_sums_fit (Q4_K, Q6_K)
  __m512 acc[R];
  PackedTile(const QuantizedRows& x, const int32_t* offs, int64_t per_row, int64_t fit_at, int64_t i0) {
    for (int r = 0; r < R; ++r) {
      q[r] = x.row_q(i0 + r);
      d[r] = x.row_d(i0 + r);
      sums[r] = x.row_sums(i0 + r);
      offsets[r] = offs ? offs + (i0 + r) * per_row : nullptr;
      fits[r] = offs && fit_at >= 0 ? offsets[r] + fit_at : nullptr;
      acc[r] = _mm512_setzero_ps();
    }
  }
  // Whether block b's sums fit 16 bits in every row of the tile.
  bool pairs_fit(int64_t b) const {
    bool all = true;
    for (int r = 0; r < R; ++r) all &= fits[r][b] != 0;
    return all;
  }
};

// acc + the lanes' four u8 levels of u times the four s8 activation levels at
// s, broadcast by the instruction itself. In assembly: GCC's intrinsic form
// copied each accumulator out and back around every vpdpbusd of a tile of 8
// rows and spilled two of them, which cost a third of the tile's time.
inline __m512i dpbusd_bcast(__m512i acc, __m512i u, const int8_t* s) {
  __asm__("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(u), "m"(*reinterpret_cast<const int32_t*>(s)));
  return acc;
}

// acc + the lanes' two s16 values of u times the two s16 values at s (broadcast).
inline __m512i dpwssd_bcast(__m512i acc, __m512i u, const int16_t* s) {
  __asm__("vpdpwssd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(u), "m"(*reinterpret_cast<const int32_t*>(s)));
  return acc;
}

// Lane c's low 16 bits of lo and of hi << kShift as one 16-bit pair (lo's
// low): the operand of a vpdpwssd that scales two sub-blocks' sums at once,
// exact where both sums fit 16 bits. Against a multiply each (vpmulld,
// which takes vpdpbusd's issue slot) and an add, tiles of 4 to 8 rows in L2
// ran 1.07-1.10x faster on Q6_K and Q3_K, 1.05x on Q4_K (docs/kernels.md,
// "Small steps").
template <int kShift = 16>
inline __m512i pair16(__m512i lo, __m512i hi) {
  return _mm512_mask_mov_epi16(_mm512_slli_epi32(hi, kShift), 0x55555555, lo);
}

// The weights' stream runs ahead of the tile by kAhead bytes: a tile of
// several rows spends long enough on each line that the hardware prefetcher
// alone left the loads waiting on memory (a fifth of an 8-row decode step's
// samples sat on them).
constexpr int64_t kAhead = 4096;
inline void fetch_ahead(const uint8_t* p) { _mm_prefetch(reinterpret_cast<const char*>(p + kAhead), _MM_HINT_T0); }

// Q8_0 tiles of 3 rows or more fetch 16 KiB ahead into L2 instead
// (prefetcht1): fetched into L1 4 KiB ahead, a decode step of 8 rows on the
// 0.8b Q8_0 file spent about as long waiting on the weights as computing
// (76-80 ms against 52-57, 4 rows 51-53 against 41-42, 3 rows 37-40 against
// 34-36; 8-32 KiB ahead ran alike, 2 KiB as slow as L1). Tiles of 2 rows
// keep fetch_ahead (into L2 the step ran 1.15x slower; with both hints, as
// the K types below, no faster; neither were 4- and 8-row steps with both).
// Tiles of 1 row issue none, as the K types' (fetch_ahead_k): the hardware's
// prefetchers alone streamed the 0.8b Q8_0 file's decode step faster in
// four of five alternated pairs at 1 thread and in all five at 2, and the
// 4b Q8_0 file's decode at 0.85-0.88 of the read bound against 0.63-0.80.
// docs/kernels.md "Small steps".
constexpr int64_t kAheadL2 = 16384;
inline void fetch_ahead_l2(const uint8_t* p) {
  _mm_prefetch(reinterpret_cast<const char*>(p + kAheadL2), _MM_HINT_T1);
}

// The K types' (and IQ4_XS's) tiles of 3 or more rows fetch each line both
// ways, into L2 16 KiB ahead and from there into L1 4 KiB ahead: few-row
// steps wait on memory, not on the core (in L2 the tiles run 3-5x faster
// than a decode step reads). On the 0.8b Q4_K_M file a step of 3, 4, 6 or 8
// rows ran 0.72-0.96x its time with the L1 prefetch alone (4 rows 43 ->
// 31-32 ms; the L2 prefetch alone 1.2x slower). Tiles of 1 or 2 rows issue
// none: the hardware's prefetchers alone streamed those steps faster on a
// Zen 4 (`batch_step_bench /work/kq/m08-q4km.gguf --reps 12 --shape 1,0`, 1
// thread, CPU ms, load average 6-7: 20.5-21.9 without, 26.4-26.8 with both
// as above but L1 2 KiB ahead, 34.3-34.6 with the L2 one alone, 26.6-26.8
// with the L1 one alone; 2 rows, quiet: 30.4-31.5 with both, 24.0-24.8
// without; docs/kernels.md "Small steps").
template <int R>
inline void fetch_ahead_k(const uint8_t* p) {
  if constexpr (R > 2) {
    _mm_prefetch(reinterpret_cast<const char*>(p + 4096), _MM_HINT_T0);
    fetch_ahead_l2(p);
  }
}

inline __m512 halves16(const uint8_t* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}

// Runs fold(b) over the blocks in quant_dot_ref's order (or the tile's
// mutated order, fixed when it was compiled).
template <class T, class Fold>
inline void for_blocks(const T&, int64_t nb, Fold&& fold) {
  if constexpr (T::kReversed) {
    for (int64_t b = nb - 1; b >= 0; --b) fold(b);
  } else {
    for (int64_t b = 0; b < nb; ++b) fold(b);
  }
}

// One block of R rows into acc: w(k) gives the block's weight vector k
// (levels 4k..4k+3 of each lane).
// The rows inside the loop over the block's 8 weight vectors, so that
// one pair of weight vectors and the rows' integer chains are live, two
// chains per row (k even, k odd), where one would leave the core waiting on
// each vpdpbusd's latency. GCC loads the weight vectors again for every
// row; one load each for all rows (an empty asm on them) made tiles of 2-3
// rows 1.3-1.5x faster with the weights in L2, but a 3-row decode step
// streaming them from memory 1.2x slower (a 5-row one 1.1x faster), cause not
// found: not kept. A form for 6-8 rows that kept the block's 8 weight vectors in
// registers and spread each row's 32 levels by shuffles took 1.2-1.3x this
// one's time per tile on a Zen 4, also over prefill's 64-row slabs (it had
// been the faster on an earlier machine: docs/bench/runtime.md).
template <class T, class Weights>
inline void q8_0_block(const uint8_t* blk, int64_t b, const T& t, __m512* acc, Weights&& w) {
  constexpr int R = T::kRows;
  __m512i I[R], J[R];
  // The offset, -128 times the activations' block sum, is where I starts.
  for (int r = 0; r < R; ++r) {
    I[r] = _mm512_set1_epi32(t.offsets[r][b]);
    J[r] = _mm512_setzero_si512();
  }
  for (int k = 0; k < 8; k += 2) {
    const __m512i w0 = w(k), w1 = w(k + 1);
    for (int r = 0; r < R; ++r) {
      I[r] = dpbusd_bcast(I[r], w0, t.q[r] + 32 * b + 4 * k);
      J[r] = dpbusd_bcast(J[r], w1, t.q[r] + 32 * b + 4 * k + 4);
    }
  }
  const __m512 dw = halves16(blk);
  for (int r = 0; r < R; ++r) {
    const __m512i sum = _mm512_add_epi32(I[r], J[r]);
    acc[r] = _mm512_fmadd_ps(_mm512_mul_ps(dw, _mm512_set1_ps(t.d[r][b])), _mm512_cvtepi32_ps(sum), acc[r]);
  }
}

// A Q8_0 block's lines: none for a tile of 1 row, into L1 for 2 rows, into
// L2 for 3 or more (kAheadL2's comment).
template <int R>
inline void q8_0_fetch_ahead(const uint8_t* blk) {
  if constexpr (R == 1) return;
  for (int l = 0; l < 544; l += 64) {
    if constexpr (R == 2)
      fetch_ahead(blk + l);
    else
      fetch_ahead_l2(blk + l);
  }
}

// A tile of 4 rows loads the next block's 8 weight vectors (in the tile's
// order) before it computes this one's (the empty asm keeps GCC from folding
// the loads into later uses; it keeps them on the stack). The 4-row tile's
// samples had sat on its weight loads (6-8% of them after each of four),
// the loads issued behind the previous vectors' vpdpbusd, and its step was
// slower than a 5-row one. On the 0.8b Q8_0 file the 4-row step took
// 0.84-0.93x its time; steps of 3 and 5 rows ran alike, 1, 6 and 8 rows
// 1.04-1.16x slower this way (8 rows spill): docs/kernels.md "Small steps".
template <class T>
void packed_q8_0_loads_ahead(const uint8_t* g, int64_t nb, T& t) {
  constexpr int R = T::kRows;
  __m512 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = t.acc[r];
  __m512i next[8];
  const int64_t first = T::kReversed ? nb - 1 : 0;
  for (int k = 0; k < 8; ++k) next[k] = _mm512_loadu_si512(g + first * 544 + 32 + 64 * k);
  for_blocks(t, nb, [&](int64_t b) {
    const uint8_t* blk = g + b * 544;
    q8_0_fetch_ahead<R>(blk);
    // The last block loads itself again: nothing past the group is read.
    const int64_t n = T::kReversed ? (b > 0 ? b - 1 : b) : (b + 1 < nb ? b + 1 : b);
    __m512i w[8];
    for (int k = 0; k < 8; ++k) {
      w[k] = next[k];
      next[k] = _mm512_loadu_si512(g + n * 544 + 32 + 64 * k);
      __asm__("" : "+v"(next[k]));
    }
    q8_0_block(blk, b, t, acc, [&](int k) { return w[k]; });
  });
  for (int r = 0; r < R; ++r) t.acc[r] = acc[r];
}

// Q8_0's tiles: the 4-row one loads a block ahead (above).
template <class T>
void packed_q8_0(const uint8_t* g, int64_t nb, T& t) {
  constexpr int R = T::kRows;
  if constexpr (R == 4) {
    packed_q8_0_loads_ahead(g, nb, t);
  } else {
    // The float sums in a local array: as the tile's members they were stored
    // back every block.
    __m512 acc[R];
    for (int r = 0; r < R; ++r) acc[r] = t.acc[r];
    for_blocks(t, nb, [&](int64_t b) {
      const uint8_t* blk = g + b * 544;
      q8_0_fetch_ahead<R>(blk);
      q8_0_block(blk, b, t, acc, [&](int k) { return _mm512_loadu_si512(blk + 32 + 64 * k); });
    });
    for (int r = 0; r < R; ++r) t.acc[r] = acc[r];
  }
}

template <class T>
void packed_q4_0(const uint8_t* g, int64_t nb, T& t) {
  constexpr int R = T::kRows;
  const __m512i low4 = _mm512_set1_epi8(0x0F);
  for_blocks(t, nb, [&](int64_t b) {
    const uint8_t* blk = g + b * 288;
    for (int l = 0; l < 288; l += 64) fetch_ahead(blk + l);
    __m512i lev[8];
    for (int k = 0; k < 4; ++k) {
      const __m512i v = _mm512_loadu_si512(blk + 32 + 64 * k);
      lev[2 * k] = _mm512_and_si512(v, low4);
      lev[2 * k + 1] = _mm512_and_si512(_mm512_srli_epi16(v, 4), low4);
    }
    const __m512 dw = halves16(blk);
    for (int r = 0; r < R; ++r) {
      __m512i I = _mm512_set1_epi32(t.offsets[r][b]), J = _mm512_setzero_si512();  // from -8 times the block sum
      const int8_t* q = t.q[r] + 32 * b;
      for (int j = 0; j < 8; j += 2) {
        I = dpbusd_bcast(I, lev[j], q + 4 * j);
        J = dpbusd_bcast(J, lev[j + 1], q + 4 * j + 4);
      }
      t.acc[r] = _mm512_fmadd_ps(_mm512_mul_ps(dw, _mm512_set1_ps(t.d[r][b])),
                                 _mm512_cvtepi32_ps(_mm512_add_epi32(I, J)), t.acc[r]);
    }
  });
}

// The levels of sub-block s's 8 groups of 4 (lev[j]: levels 32s + 4j..+3 of each lane).
template <DType kType, int R>
inline void sub_levels(const uint8_t* sub, __m512i* lev) {
  const __m512i low4 = _mm512_set1_epi8(0x0F);
  for (int l = 0; l < k_layout(kType).sub; l += 64) fetch_ahead_k<R>(sub + l);
  if constexpr (kType == DType::kQ3_K || kType == DType::kQ2_K) {
    // The low two bits moved down and masked; for Q3_K 4 added where the third is set.
    const __m512i low2 = _mm512_set1_epi8(3), four = _mm512_set1_epi8(4);
    for (int half = 0; half < 2; ++half) {
      __m512i v = _mm512_loadu_si512(sub + 64 * half);
      __asm__("" : "+v"(v));  // one load for its four uses
      for (int m = 0; m < 4; ++m) {
        const int j = 4 * half + m;
        lev[j] = _mm512_and_si512(m ? _mm512_srli_epi16(v, 2 * m) : v, low2);
        if constexpr (kType == DType::kQ3_K) {
          const __m512i h = _mm512_loadu_si512(sub + 128);
          lev[j] = _mm512_mask_add_epi8(lev[j], _mm512_test_epi8_mask(h, _mm512_set1_epi8(static_cast<char>(1 << j))),
                                        lev[j], four);
        }
      }
    }
    return;
  }
  if constexpr (kType == DType::kQ6_K) {
    // Six level vectors masked out of bits 0-5; each of the other two from
    // bits 6-7 of three vectors: the third's stay, the second's move to bits
    // 4-5 and the first's to 2-3 (16-bit shifts: the bits they carry in from
    // the next byte fall outside each selection's mask), two bit selections
    // (vpternlogd) join them, one more shift and mask bring bits 2-7 down.
    // 18 instructions for the 8 level vectors, against 26 for nibbles and
    // separate top bits.
    const __m512i low6 = _mm512_set1_epi8(0x3F);
    const __m512i top2 = _mm512_set1_epi8(static_cast<char>(0xC0)), top4 = _mm512_set1_epi8(static_cast<char>(0xF0));
    for (int h = 0; h < 2; ++h) {
      // Named, not an array: GCC kept an array of them on the stack.
      __m512i a = _mm512_loadu_si512(sub + 192 * h), b = _mm512_loadu_si512(sub + 192 * h + 64),
              c = _mm512_loadu_si512(sub + 192 * h + 128);
      __asm__("" : "+v"(a), "+v"(b), "+v"(c));  // one load for each one's two uses
      lev[3 * h] = _mm512_and_si512(a, low6);
      lev[3 * h + 1] = _mm512_and_si512(b, low6);
      lev[3 * h + 2] = _mm512_and_si512(c, low6);
      // vpternlogd 0xD8: where the third operand's bit is set, the second's,
      // else the first's (the first is the one overwritten: a shift's result,
      // not a constant to copy first).
      const __m512i bc = _mm512_ternarylogic_epi32(_mm512_srli_epi16(b, 2), c, top2, 0xD8);
      const __m512i abc = _mm512_ternarylogic_epi32(_mm512_srli_epi16(a, 4), bc, top4, 0xD8);
      lev[6 + h] = _mm512_and_si512(_mm512_srli_epi16(abc, 2), low6);
    }
    return;
  }
  for (int k = 0; k < 4; ++k) {
    __m512i v = _mm512_loadu_si512(sub + 64 * k);
    __asm__("" : "+v"(v));  // one load for both uses (the compiler would fold it into each)
    lev[2 * k] = _mm512_and_si512(v, low4);
    lev[2 * k + 1] = _mm512_and_si512(_mm512_srli_epi16(v, 4), low4);
  }
  if constexpr (kType == DType::kQ5_K) {
    // The fifth bit as a byte mask: 16 added where it is set (the nibble is below 16).
    const __m512i h = _mm512_loadu_si512(sub + 256), sixteen = _mm512_set1_epi8(16);
    for (int j = 0; j < 8; ++j)
      lev[j] = _mm512_mask_add_epi8(lev[j], _mm512_test_epi8_mask(h, _mm512_set1_epi8(static_cast<char>(1 << j))),
                                    lev[j], sixteen);
  }
  if constexpr (kType == DType::kIQ4_XS) {
    // Each index to its table value + 128, one vpshufb (the table in every 128-bit lane).
    alignas(16) static const std::array<uint8_t, 16> kTable = [] {
      std::array<uint8_t, 16> v{};
      for (int i = 0; i < 16; ++i) v[i] = static_cast<uint8_t>(kIq4Values[i] + 128);
      return v;
    }();
    const __m512i table = _mm512_broadcast_i32x4(_mm_load_si128(reinterpret_cast<const __m128i*>(kTable.data())));
    for (int j = 0; j < 8; ++j) lev[j] = _mm512_shuffle_epi8(table, lev[j]);
  }
}

// acc[r] + the lane sums of lev[0..n) against each row r's activation
// groups from `at`, the rows inside the loop over the level vectors: R
// independent chains advance together. A row's whole chain at a time left
// the core waiting on each vpdpbusd's latency (Q6_K, 8 rows: 1.18x slower).
template <int n, class T>
inline void dots(const T& t, const __m512i* lev, int64_t at, __m512i* acc) {
  for (int j = 0; j < n; ++j)
    for (int r = 0; r < T::kRows; ++r) acc[r] = dpbusd_bcast(acc[r], lev[j], t.q[r] + at + 4 * j);
}

// Rows [r0, r0 + n) of a Q6_K or Q3_K sub-block s of 32 levels into I: each
// half of 16 a chain per row from its offset, then times its signed scale,
// both halves by one vpdpwssd where `pairs` (their sums fit 16 bits).
// A row's two chains advance together, one vpdpbusd each per level vector
// (the halves one after the other, 2 rows in L2: 141 G products/s against 145).
template <int r0, int n, class T>
inline void six_rows(const T& t, const __m512i* lev, int64_t b, int s, __m512i sa, __m512i sb, bool pairs,
                     int32_t (*I)[16]) {
  const int64_t at = b * kSuperBlock + 32 * s;
  __m512i da[n], db[n];
  for (int r = 0; r < n; ++r) {
    const int32_t* off = t.offsets[r0 + r] + b * 16 + 2 * s;
    da[r] = _mm512_set1_epi32(off[0]);
    db[r] = _mm512_set1_epi32(off[1]);
  }
  for (int j = 0; j < 4; ++j)
    for (int r = 0; r < n; ++r) {
      da[r] = dpbusd_bcast(da[r], lev[j], t.q[r0 + r] + at + 4 * j);
      db[r] = dpbusd_bcast(db[r], lev[4 + j], t.q[r0 + r] + at + 16 + 4 * j);
    }
  if (pairs) {
    const __m512i scales = pair16(sa, sb);
    for (int r = 0; r < n; ++r)
      _mm512_store_si512(I[r0 + r], _mm512_dpwssd_epi32(_mm512_load_si512(I[r0 + r]), pair16(da[r], db[r]), scales));
    return;
  }
  for (int r = 0; r < n; ++r) {
    const __m512i sum = _mm512_add_epi32(_mm512_mullo_epi32(da[r], sa), _mm512_mullo_epi32(db[r], sb));
    _mm512_store_si512(I[r0 + r], _mm512_add_epi32(_mm512_load_si512(I[r0 + r]), sum));
  }
}

template <DType kType, class T>
void packed_k(const uint8_t* g, int64_t nb, T& t) {
  constexpr int R = T::kRows;
  constexpr bool kSix = kType == DType::kQ6_K || kType == DType::kQ3_K;  // signed scales per 16, an offset
  const KLayout lay = k_layout(kType);
  for_blocks(t, nb, [&](int64_t b) {
    const uint8_t* blk = g + b * lay.block();
    // Q3_K's sums of 16 fit 16 bits whatever the activations (|n - 4| <= 4).
    bool pairs = false;
    if constexpr (kSix) pairs = kType == DType::kQ3_K || t.pairs_fit(b);
    // In memory, once per sub-block: the registers are the levels'.
    alignas(64) int32_t I[R][16] = {}, M[R][16] = {};
    auto add = [](int32_t* at, __m512i v) { _mm512_store_si512(at, _mm512_add_epi32(_mm512_load_si512(at), v)); };
    for (int s = 0; s < 8; ++s) {
      __m512i lev[8];
      sub_levels<kType, R>(blk + lay.header + lay.sub * s, lev);
      auto bytes16 = [&](int at) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + at)); };
      if constexpr (kSix) {
        // Two sub-blocks of 16 with signed scales; levels n - 32 (Q3_K n - 4):
        // each sub-block's sum starts from the offset, -32 (-4) times the
        // activations' sum of 16 (the same for every lane, a broadcast from memory: one
        // vpdpwssd per row against the scales cost a tenth of the tile).
        const __m512i sa = _mm512_cvtepi8_epi32(bytes16(32 + 32 * s)), sb = _mm512_cvtepi8_epi32(bytes16(48 + 32 * s));
        // 8 rows' 16 chains beside the levels and the sums left GCC short
        // of registers: two groups of rows (Q6_K, 8 rows in L2: 172 G
        // products/s, one group 168-170).
        if constexpr (R > 4) {
          six_rows<0, (R + 1) / 2>(t, lev, b, s, sa, sb, pairs, I);
          six_rows<(R + 1) / 2, R / 2>(t, lev, b, s, sa, sb, pairs, I);
        } else {
          six_rows<0, R>(t, lev, b, s, sa, sb, pairs, I);
        }
      } else if constexpr (kType == DType::kQ2_K) {
        // Unsigned scales per 16 (the bytes' low nibbles), the two as a
        // 16-bit pair against the sums' (at most 3 * 16 * 127 in magnitude,
        // so they always fit); the mins' sum one vpdpwssd per row against the
        // two mins as a 16-bit pair (high nibbles).
        const __m512i both =
            _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 64 + 32 * s)));
        const __m512i scales = _mm512_and_si512(both, _mm512_set1_epi16(0xF));
        const __m512i mn2 = _mm512_srli_epi16(both, 4);
        const int64_t at = b * kSuperBlock + 32 * s;
        __m512i da[R], db[R];
        for (int r = 0; r < R; ++r) da[r] = db[r] = _mm512_setzero_si512();
        dots<4>(t, lev, at, da);
        dots<4>(t, lev + 4, at + 16, db);
        for (int r = 0; r < R; ++r) {
          _mm512_store_si512(I[r], _mm512_dpwssd_epi32(_mm512_load_si512(I[r]), pair16(da[r], db[r]), scales));
          _mm512_store_si512(M[r], dpwssd_bcast(_mm512_load_si512(M[r]), mn2, t.sums[r] + b * 16 + 2 * s));
        }
      } else if constexpr (kType == DType::kIQ4_XS) {
        // One signed scale per 32; the sum starts from the offset, -128 times
        // the activations' sum of 32.
        const __m512i sc = _mm512_cvtepi8_epi32(bytes16(32 + 16 * s));
        __m512i d[R];
        for (int r = 0; r < R; ++r) d[r] = _mm512_set1_epi32(t.offsets[r][b * 8 + s]);
        dots<8>(t, lev, b * kSuperBlock + 32 * s, d);
        for (int r = 0; r < R; ++r) add(I[r], _mm512_mullo_epi32(d[r], sc));
      } else {
        // The min times the sub-block's two sums of 16: one vpdpwssd against
        // the min as a 16-bit pair (mn, mn).
        const __m512i sc = _mm512_cvtepu8_epi32(bytes16(64 + 16 * s)), mn = _mm512_cvtepu8_epi32(bytes16(192 + 16 * s));
        const __m512i mn2 = _mm512_or_si512(mn, _mm512_slli_epi32(mn, 16));
        __m512i d[R];
        for (int r = 0; r < R; ++r) d[r] = _mm512_setzero_si512();
        dots<8>(t, lev, b * kSuperBlock + 32 * s, d);
        for (int r = 0; r < R; ++r) {
          add(I[r], _mm512_mullo_epi32(d[r], sc));
          add(M[r], dpwssd_bcast(_mm512_setzero_si512(), mn2, t.sums[r] + b * 16 + 2 * s));
        }
      }
    }
    const __m512 d = halves16(blk);
    for (int r = 0; r < R; ++r) {
      const __m512 dx = _mm512_set1_ps(t.d[r][b]);
      t.acc[r] = _mm512_fmadd_ps(_mm512_mul_ps(d, dx), _mm512_cvtepi32_ps(_mm512_load_si512(I[r])), t.acc[r]);
      if constexpr (!kSix && kType != DType::kIQ4_XS)
        t.acc[r] = _mm512_fnmadd_ps(_mm512_mul_ps(halves16(blk + 32), dx), _mm512_cvtepi32_ps(_mm512_load_si512(M[r])),
                                    t.acc[r]);
    }
  });
}

// Q4_K in its paired layout: per pair of sub-blocks, eight loads, two ANDs
// each, two vpdpbusd per row whose activation groups are broadcast from memory
// (a load, not a move from a general register); each pair's two sums are
// scaled into one running integer per row at once, and the mins' sum (one
// vpdpwssd per pair against the activations' two sub-block sums) runs after
// the levels, so that a tile of 8 rows keeps its 24 integer accumulators in
// registers. Where the block's sums fit 16 bits in every row of the tile
// (quant_packed_offsets), one vpdpwssd scales a pair's two. Integer sums:
// exact in any order, so the bits are the others'.
template <class T>
void packed_q4_k(const uint8_t* g, int64_t nb, T& t) {
  constexpr int R = T::kRows;
  const __m512i low4 = _mm512_set1_epi8(0x0F), high4 = _mm512_set1_epi8(static_cast<char>(0xF0));
  const KLayout lay = k_layout(DType::kQ4_K);
  for_blocks(t, nb, [&](int64_t b) {
    const uint8_t* blk = g + b * lay.block();
    const bool pairs = t.pairs_fit(b);
    // In memory, once per pair: the registers are the inner loop's.
    alignas(64) int32_t I[R][16] = {};
    for (int p = 0; p < 4; ++p) {
      const uint8_t* sub = blk + lay.header + 2 * lay.sub * p;  // the pair's two sub-blocks
      __m512i de[R], dodd[R];
      for (int r = 0; r < R; ++r) de[r] = dodd[r] = _mm512_setzero_si512();
      const int64_t at0 = b * kSuperBlock + 64 * p;
      // Unrolled: as a loop each row's activation pointer was a register
      // stepped every turn, and an 8-row tile ran 1.15x slower per product.
#pragma GCC unroll 8
      for (int k = 0; k < 8; ++k) {
        fetch_ahead_k<R>(sub + 64 * k);
        __m512i v = _mm512_loadu_si512(sub + 64 * k);
        __asm__("" : "+v"(v));  // one load for both ANDs (the compiler would fold it into each)
        const __m512i lo = _mm512_and_si512(v, low4), hi = _mm512_and_si512(v, high4);
        for (int r = 0; r < R; ++r) {
          de[r] = dpbusd_bcast(de[r], lo, t.q[r] + at0 + 4 * k);
          dodd[r] = dpbusd_bcast(dodd[r], hi, t.q[r] + at0 + 32 + 4 * k);
        }
      }
      // The odd sums are 16 times the levels' (high nibbles), so I holds 16
      // times the block's sum (below 2^29 in magnitude), divided out once
      // per block, exactly. `both` is the pair's two scales times 16, shared
      // by the rows: against the sums as a pair (dodd << 12 is the odd sum's
      // half), or split into the even one times 16 and the odd one alone.
      const __m512i both = _mm512_slli_epi16(
          _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 64 + 32 * p))), 4);
      if (pairs) {
        for (int r = 0; r < R; ++r)
          _mm512_store_si512(I[r], _mm512_dpwssd_epi32(_mm512_load_si512(I[r]), pair16<12>(de[r], dodd[r]), both));
      } else {
        const __m512i se = _mm512_and_si512(both, _mm512_set1_epi32(0xFFFF)), so = _mm512_srli_epi32(both, 20);
        for (int r = 0; r < R; ++r)
          _mm512_store_si512(I[r], _mm512_add_epi32(_mm512_load_si512(I[r]), _mm512_add_epi32(_mm512_mullo_epi32(de[r], se),
                                                                                               _mm512_mullo_epi32(dodd[r], so))));
      }
    }
    // Each pair of sub-blocks' mins as a 16-bit pair per lane, once for all
    // rows: each row's M is then one vpdpwssd per pair against its pair of
    // sums of 32 (quant_packed_offsets), broadcast from memory; against the
    // sums of 16 it took one per sub-block, 9% of the 8-row tiles' samples
    // in a Q4_K_M prefill.
    __m512i mn[4];
    for (int p = 0; p < 4; ++p)
      mn[p] = _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 192 + 32 * p)));
    const __m512 d = halves16(blk), dmin = halves16(blk + 32);
    for (int r = 0; r < R; ++r) {
      const int16_t* sums = reinterpret_cast<const int16_t*>(t.offsets[r] + b * 4);
      __m512i M = _mm512_setzero_si512();
      for (int p = 0; p < 4; ++p) M = dpwssd_bcast(M, mn[p], sums + 2 * p);
      const __m512 dx = _mm512_set1_ps(t.d[r][b]);
      const __m512i sum = _mm512_srai_epi32(_mm512_load_si512(I[r]), 4);
      t.acc[r] = _mm512_fmadd_ps(_mm512_mul_ps(d, dx), _mm512_cvtepi32_ps(sum), t.acc[r]);
      t.acc[r] = _mm512_fnmadd_ps(_mm512_mul_ps(dmin, dx), _mm512_cvtepi32_ps(M), t.acc[r]);
    }
  });
}

template <int R, BlockOrder kOrder>
void packed_tile(DType dtype, const uint8_t* g, const QuantizedRows& x, const int32_t* offsets, int64_t i0, float* y,
                 int64_t ldy, int cols) {
  const int64_t per_row = quant_packed_offsets_per_row(dtype, x.cols), nb = x.cols / dtype_block(dtype).elems;
  PackedTile<R, kOrder> t(x, offsets, per_row, offsets_end_with_fits(dtype) ? per_row - nb : -1, i0);
  switch (dtype) {
    case DType::kQ8_0:
      packed_q8_0(g, nb, t);
      break;
    case DType::kQ4_0:
      packed_q4_0(g, nb, t);
      break;
    case DType::kQ4_K:
      packed_q4_k(g, nb, t);
      break;
    case DType::kQ5_K:
      packed_k<DType::kQ5_K>(g, nb, t);
      break;
    case DType::kQ6_K:
      packed_k<DType::kQ6_K>(g, nb, t);
      break;
    case DType::kQ3_K:
      packed_k<DType::kQ3_K>(g, nb, t);
      break;
    case DType::kIQ4_XS:
      packed_k<DType::kIQ4_XS>(g, nb, t);
      break;
    case DType::kQ2_K:
      packed_k<DType::kQ2_K>(g, nb, t);
      break;
    default:
      break;
  }
  // A masked store of the group's first `cols` lanes: the copy through a
  // buffer it replaced was a call to memmove per row and tile.
  const __mmask16 keep = static_cast<__mmask16>((1u << cols) - 1);
  for (int r = 0; r < R; ++r) _mm512_mask_storeu_ps(y + r * ldy, keep, t.acc[r]);
}

template <BlockOrder kOrder>
void packed_tile_in_order(DType dtype, const uint8_t* group, const QuantizedRows& x, const int32_t* offsets, int64_t i0,
                          int rows, float* y, int64_t ldy, int cols) {
  static_assert(kQuantPackedTileRows <= 8);
  switch (rows) {
    case 1:
      return packed_tile<1, kOrder>(dtype, group, x, offsets, i0, y, ldy, cols);
    case 2:
      return packed_tile<2, kOrder>(dtype, group, x, offsets, i0, y, ldy, cols);
    case 3:
      return packed_tile<3, kOrder>(dtype, group, x, offsets, i0, y, ldy, cols);
    case 4:
      return packed_tile<4, kOrder>(dtype, group, x, offsets, i0, y, ldy, cols);
    case 5:
      return packed_tile<5, kOrder>(dtype, group, x, offsets, i0, y, ldy, cols);
    case 6:
      return packed_tile<6, kOrder>(dtype, group, x, offsets, i0, y, ldy, cols);
    case 7:
      return packed_tile<7, kOrder>(dtype, group, x, offsets, i0, y, ldy, cols);
    default:
      return packed_tile<8, kOrder>(dtype, group, x, offsets, i0, y, ldy, cols);
  }
}

}  // namespace

void quant_packed_tile(DType dtype, const uint8_t* group, const QuantizedRows& x, const int32_t* offsets, int64_t i0,
                       int rows, float* y, int64_t ldy, int cols) {
  packed_tile_in_order<BlockOrder::kReference>(dtype, group, x, offsets, i0, rows, y, ldy, cols);
}

void quant_packed_tile_reversed(DType dtype, const uint8_t* group, const QuantizedRows& x, const int32_t* offsets,
                                int64_t i0, int rows, float* y, int64_t ldy, int cols) {
  packed_tile_in_order<BlockOrder::kReversedInTiles>(dtype, group, x, offsets, i0, rows, y, ldy, cols);
}

}  // namespace sb::cpu
SB_ISA_TARGET_END
#endif
