// The bf16 product: y[i, j] = sum over input pairs p, in ascending order, of
// dp_pair (bf16.h) on x row i's pair p and weight row j's pair p, one chain
// per output element starting from +0. No horizontal sum: the packed layout
// puts 16 output columns in the lanes of a vector, so a lane is one element's
// whole chain. A tile of rows by columns only decides which chains run side by
// side; a row computed alone (decode), in any tile, on any thread, gets the
// same bits.
//
// Threads take whole panels of output columns; the reduction is never split.
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>
#include <random>
#include <vector>

#include "runtime/cpu/bf16.h"
#include "runtime/cpu/cpu_kernels.h"
#include "runtime/cpu/float_mode.h"
#include "runtime/cpu/quant_kernels.h"
#include "runtime/cpu/simd.h"

#if defined(__AVX512BF16__)
#include <immintrin.h>
#endif

namespace sb {

PackedWeight::PackedWeight(std::vector<int64_t> rows, int64_t c)
    : cols(c), pairs((c + 1) / 2), part_rows(std::move(rows)) {
  for (int64_t r : part_rows) {
    part_panel.push_back(panels);
    panels += (r + kPanelCols - 1) / kPanelCols;
  }
  part_panel.push_back(panels);
  allocate(static_cast<size_t>(panels * pairs * kPanelCols) * sizeof(uint32_t));
}

PackedWeight::PackedWeight(DType q, int64_t rows, int64_t c, size_t want) : cols(c), part_rows{rows}, quant(q) {
  allocate(want);
}

void PackedWeight::allocate(size_t want) {
  constexpr size_t kHuge = size_t(2) << 20, kPage = 4096;
  if (want < kHuge) {
    bytes = std::max<size_t>(64, (want + 63) / 64 * 64);
    data = static_cast<uint32_t*>(std::aligned_alloc(64, bytes));
    if (!data) throw std::bad_alloc();
    return;
  }
  // A mapping of its own, 2 MiB-aligned, with 2 MiB pages for its whole
  // 2 MiB stretches: one TLB entry then covers 2 MiB of a stream read once
  // per token. Not from the heap, whose huge pages (tune_memory) around an
  // aligned block and whose kept free chunks held up to 4 MiB more per
  // weight; nor whole huge pages over its tail, which held up to 2 MiB that
  // no byte of the weight uses (164 MiB over the 0.8b preset's Q4_K_M file).
  bytes = (want + kPage - 1) / kPage * kPage;
  const size_t span = bytes + kHuge;
  void* p = mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  const uintptr_t base = reinterpret_cast<uintptr_t>(p), start = (base + kHuge - 1) / kHuge * kHuge;
  if (start > base) munmap(p, start - base);
  if (base + span > start + bytes) munmap(reinterpret_cast<void*>(start + bytes), base + span - start - bytes);
  data = reinterpret_cast<uint32_t*>(start);
  mapped_ = true;
  madvise(data, bytes / kHuge * kHuge, MADV_HUGEPAGE);
}

PackedWeight::~PackedWeight() {
  if (mapped_)
    munmap(data, bytes);
  else
    std::free(data);
}

namespace cpu {
namespace {

constexpr int64_t kCols = PackedWeight::kPanelCols;

// Reads weight row j, feature k as a bf16 (to_bf16 rounding for f32).
struct WeightReader {
  const WeightRef& w;
  uint16_t at(int64_t j, int64_t k) const {
    if (k >= w.cols || j >= w.rows) return 0;
    if (w.dtype == DType::kBF16) {
      const uint16_t h = static_cast<const uint16_t*>(w.data)[j * w.cols + k];
      return (h & 0x7f80u) == 0 ? static_cast<uint16_t>(h & 0x8000u) : h;  // subnormal to signed zero
    }
    return to_bf16(static_cast<const float*>(w.data)[j * w.cols + k]);
  }
};

// Panel p of part w, whose first panel is `first`.
void pack_panel(const WeightRef& w, PackedWeight& pw, int64_t first, int64_t p) {
  const WeightReader r{w};
  uint32_t* out = pw.data + p * pw.pairs * kCols;
  for (int64_t c = 0; c < kCols; ++c) {
    const int64_t j = (p - first) * kCols + c;
    for (int64_t q = 0; q < pw.pairs; ++q)
      out[q * kCols + c] = static_cast<uint32_t>(r.at(j, 2 * q)) | (static_cast<uint32_t>(r.at(j, 2 * q + 1)) << 16);
  }
}

// Stores the first n lanes.
inline void store_lanes(const float* lanes, float* y, int64_t n) { std::copy(lanes, lanes + n, y); }

// The fused multiply-add tile: MR rows by kFmaCols columns of a panel, each
// pair two fp32 fmas, odd element first, as dp_pair. x holds the rows already
// rounded to bf16 values, as floats, so that each factor is one broadcast.
// Under the kernels' float mode (FTZ and DAZ, float_mode.h) the fma unit
// itself flushes a subnormal result, which is dp_pair's flush; elsewhere the
// flush is an explicit step.
constexpr int64_t kFmaCols = 32;
constexpr int64_t kPrefetchPairs = 32;  // 8 KiB ahead: the best of 4 to 128 on the 0.8b shapes

template <int MR>
void tile_fma(const float* x, int64_t ldx, const uint32_t* panel, int64_t pairs, float* y, int64_t ldy,
              int64_t ncols) {
#if defined(__x86_64__) || defined(__i386__)
  constexpr auto flush = [](V16 v) { return v; };
#else
  constexpr auto flush = [](V16 v) { return ftz(v); };
#endif
  V16 acc[MR][2];
  for (int i = 0; i < MR; ++i) acc[i][0] = acc[i][1] = V16::zero();
  for (int64_t q = 0; q < pairs; ++q) {
    const char* ahead = reinterpret_cast<const char*>(panel + (q + kPrefetchPairs) * kCols);
    __builtin_prefetch(ahead);
    __builtin_prefetch(ahead + 64);
    V16 we[2], wo[2];
    V16::load_bf16_pairs(panel + q * kCols, &we[0], &wo[0]);
    V16::load_bf16_pairs(panel + q * kCols + 16, &we[1], &wo[1]);
    for (int i = 0; i < MR; ++i) {
      const V16 xe = V16::set1(x[i * ldx + 2 * q]), xo = V16::set1(x[i * ldx + 2 * q + 1]);
      acc[i][0] = flush(fma(xe, we[0], flush(fma(xo, wo[0], acc[i][0]))));
      acc[i][1] = flush(fma(xe, we[1], flush(fma(xo, wo[1], acc[i][1]))));
    }
  }
  alignas(64) float lanes[kFmaCols];
  for (int i = 0; i < MR; ++i) {
    acc[i][0].store(lanes);
    acc[i][1].store(lanes + 16);
    store_lanes(lanes, y + i * ldy, ncols);
  }
}

#if defined(__AVX512BF16__)

// The native tile: MR rows by the 64 columns of one panel, one vdpbf16ps per
// (row, 16 columns, pair).
template <int MR>
void tile_native(const uint16_t* x, int64_t ldx, const uint32_t* panel, int64_t pairs, float* y, int64_t ldy,
                 int64_t ncols) {
  __m512 acc[MR][4];
  for (int i = 0; i < MR; ++i)
    for (int v = 0; v < 4; ++v) acc[i][v] = _mm512_setzero_ps();
  const uint32_t* xr[MR];
  for (int i = 0; i < MR; ++i) xr[i] = reinterpret_cast<const uint32_t*>(x + i * ldx);
  for (int64_t q = 0; q < pairs; ++q) {
    const uint32_t* wq = panel + q * kCols;
    // A step reads each panel from memory once, and the hardware prefetcher
    // alone leaves the loop waiting on it (decode ran 35 % faster with this
    // at 2 threads): ask for the lines kPrefetchPairs pairs ahead, which
    // run on into the next panel of the task. Into L2, not L1: on Zen 4 a
    // tile of 8 rows streaming from memory ran 15-20 % slower with its
    // prefetches aimed at L1 (docs/kernels.md), one row no faster.
    const char* ahead = reinterpret_cast<const char*>(wq + kPrefetchPairs * kCols);
    for (int line = 0; line < 4; ++line) _mm_prefetch(ahead + 64 * line, _MM_HINT_T1);
    const __m512bh w0 = (__m512bh)_mm512_load_si512(wq), w1 = (__m512bh)_mm512_load_si512(wq + 16),
                   w2 = (__m512bh)_mm512_load_si512(wq + 32), w3 = (__m512bh)_mm512_load_si512(wq + 48);
    for (int i = 0; i < MR; ++i) {
      const __m512bh xb = (__m512bh)_mm512_set1_epi32(static_cast<int>(xr[i][q]));
      acc[i][0] = _mm512_dpbf16_ps(acc[i][0], xb, w0);
      acc[i][1] = _mm512_dpbf16_ps(acc[i][1], xb, w1);
      acc[i][2] = _mm512_dpbf16_ps(acc[i][2], xb, w2);
      acc[i][3] = _mm512_dpbf16_ps(acc[i][3], xb, w3);
    }
  }
  if (ncols == kCols) {
    for (int i = 0; i < MR; ++i)
      for (int v = 0; v < 4; ++v) _mm512_storeu_ps(y + i * ldy + 16 * v, acc[i][v]);
    return;
  }
  alignas(64) float lanes[kCols];
  for (int i = 0; i < MR; ++i) {
    for (int v = 0; v < 4; ++v) _mm512_store_ps(lanes + 16 * v, acc[i][v]);
    store_lanes(lanes, y + i * ldy, ncols);
  }
}
#endif

template <class X>
using Tile = void (*)(const X*, int64_t, const uint32_t*, int64_t, float*, int64_t, int64_t);

// Tiles by row count: kX[r] computes r rows.
#if SB_V16_AVX512
constexpr Tile<float> kFma[] = {nullptr,       &tile_fma<1>,  &tile_fma<2>, &tile_fma<3>, &tile_fma<4>,
                                &tile_fma<5>,  &tile_fma<6>,  &tile_fma<7>, &tile_fma<8>, &tile_fma<9>,
                                &tile_fma<10>, &tile_fma<11>, &tile_fma<12>};
#else
constexpr Tile<float> kFma[] = {nullptr, &tile_fma<1>, &tile_fma<2>};  // V16 is two or sixteen registers here
#endif
constexpr int kFmaMr = std::size(kFma) - 1;
static_assert(12 % kFmaMr == 0, "the timing in fma_tiles_faster runs whole tiles");
// Fewer rows than this run the native tiles where present: a call of a few
// rows waits on the latency of each element's chain of fmas (two per pair)
// or on memory, not on the multiply units.
constexpr int64_t kFmaMinRows = 8;

#if defined(__AVX512BF16__)
constexpr Tile<uint16_t> kNative[] = {nullptr,         &tile_native<1>, &tile_native<2>, &tile_native<3>,
                                      &tile_native<4>, &tile_native<5>, &tile_native<6>, &tile_native<7>,
                                      &tile_native<8>};
// Many rows run in tiles of 6, whose 24 accumulators fit in the registers
// beside the weights: where a call is compute-bound that is fastest.
constexpr int kNativeMr = 6;
static_assert(12 % kNativeMr == 0, "the timing in fma_tiles_faster runs whole tiles");
// Up to this many rows run as one tile, so that each panel is read from
// memory once. A decode step of 7 or 8 sequences waits on the weights'
// stream: a second pass over each panel for the last rows, from cache,
// leaves that stream idle for its time, which costs more than the
// accumulators a tile of 8 keeps on the stack (docs/kernels.md).
// Compute-bound calls (prefill) stay faster in tiles of 6.
constexpr int64_t kNativeOneTileRows = std::size(kNative) - 1;
#endif

// y = x w for the m rows of x (ld elements each, already rounded) with
// tiles[r] computing r rows.
template <class X>
void run_tiles(ThreadPool* pool, const X* x, int64_t ld, int64_t m, const PackedWeight& w,
               std::span<float* const> outs, const Tile<X>* tiles, int mr, int64_t tile_cols) {
  // A task is a run of consecutive panels, so that each thread streams one
  // contiguous stretch of the weights (what the hardware prefetcher follows
  // best when a decode step reads them from memory).
  const int64_t per = std::max<int64_t>(1, w.panels / (4 * pool->size()));
  pool->parallel_for((w.panels + per - 1) / per, [&](int64_t task) {
    for (int64_t p = task * per; p < std::min(w.panels, (task + 1) * per); ++p) {
      const size_t part = std::upper_bound(w.part_panel.begin(), w.part_panel.end(), p) - w.part_panel.begin() - 1;
      const int64_t N = w.part_rows[part], j0 = (p - w.part_panel[part]) * kCols, ncols = std::min(kCols, N - j0);
      float* y = outs[part];
      const uint32_t* panel = w.panel(p);
      for (int64_t c = 0; c < ncols; c += tile_cols) {
        const int64_t n = std::min(tile_cols, ncols - c);
        int64_t i = 0;
        for (; i + mr <= m; i += mr) tiles[mr](x + i * ld, ld, panel + c, w.pairs, y + i * N + j0 + c, N, n);
        if (i < m) tiles[m - i](x + i * ld, ld, panel + c, w.pairs, y + i * N + j0 + c, N, n);
      }
    }
  });
}

}  // namespace

void round_rows_to_bf16(const float* x, int64_t m, int64_t k, uint16_t* out, int64_t ld) {
  for (int64_t i = 0; i < m; ++i) {
    const float* xr = x + i * k;
    uint16_t* o = out + i * ld;
    int64_t c = 0;
#if defined(__AVX512F__)
    const __m512i exp_mask = _mm512_set1_epi32(0x7f800000), one = _mm512_set1_epi32(1),
                  bias = _mm512_set1_epi32(0x7fff), sign = _mm512_set1_epi32(0x8000),
                  mant = _mm512_set1_epi32(0x7fffff), quiet = _mm512_set1_epi32(0x40);
    for (; c + 16 <= k; c += 16) {
      const __m512i u = _mm512_loadu_si512(xr + c);
      const __m512i e = _mm512_and_si512(u, exp_mask);
      __m512i r = _mm512_srli_epi32(
          _mm512_add_epi32(_mm512_add_epi32(u, bias), _mm512_and_si512(_mm512_srli_epi32(u, 16), one)), 16);
      const __m512i hi = _mm512_srli_epi32(u, 16);
      r = _mm512_mask_mov_epi32(r, _mm512_cmpeq_epi32_mask(e, _mm512_setzero_si512()), _mm512_and_si512(hi, sign));
      const __mmask16 special = _mm512_cmpeq_epi32_mask(e, exp_mask);
      const __mmask16 nan = _mm512_mask_test_epi32_mask(special, u, mant);
      r = _mm512_mask_mov_epi32(r, special, hi);
      r = _mm512_mask_or_epi32(r, nan, r, quiet);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(o + c), _mm512_cvtepi32_epi16(r));
    }
#endif
    for (; c < k; ++c) o[c] = to_bf16(xr[c]);
    for (; c < ld; ++c) o[c] = 0;
  }
}

bool native_bf16_agrees() {
  static const bool agrees = native_bf16_probe();
  return agrees;
}

bool native_bf16_probe() {
#if defined(__AVX512BF16__)
  // Probe lanes: random magnitudes over a wide range, exact cancellations and
  // products in and below the subnormal range, each against dp_pair.
  std::mt19937 rng(20261203);
  auto random_bf16 = [&] {
    const uint32_t e = (rng() % 8 == 0) ? rng() % 4 : 100 + rng() % 56;
    return static_cast<uint16_t>(((rng() & 1) << 15) | (e << 7) | (rng() & 127));
  };
  for (int rep = 0; rep < 4096; ++rep) {
    alignas(64) uint32_t xs[16], ws[16];
    alignas(64) float acc[16], got[16];
    for (int l = 0; l < 16; ++l) {
      xs[l] = random_bf16() | (static_cast<uint32_t>(random_bf16()) << 16);
      ws[l] = random_bf16() | (static_cast<uint32_t>(random_bf16()) << 16);
      // Keep probe inputs free of subnormals, as real inputs are (to_bf16).
      for (uint32_t* v : {&xs[l], &ws[l]})
        for (int half = 0; half < 2; ++half)
          if (((*v >> (16 * half)) & 0x7f80u) == 0) *v &= ~(0x7fffu << (16 * half));
      const float base = std::ldexp(static_cast<float>(rng() % 65536) / 65536.0f, static_cast<int>(rng() % 64) - 140);
      acc[l] = rng() % 4 == 0 ? 0.0f : flush_subnormal((rng() & 1) ? -base : base);
      if (rep % 16 == 0) {  // exact cancellation of the two products
        xs[l] = (xs[l] & 0xffffu) | (xs[l] << 16);
        ws[l] = (ws[l] & 0xffffu) | ((ws[l] ^ 0x8000u) << 16);
      }
    }
    const __m512 r = _mm512_dpbf16_ps(_mm512_load_ps(acc), (__m512bh)_mm512_load_si512(xs),
                                      (__m512bh)_mm512_load_si512(ws));
    _mm512_store_ps(got, r);
    for (int l = 0; l < 16; ++l) {
      const float want = dp_pair(acc[l], xs[l], ws[l]);
      if (std::memcmp(&want, &got[l], 4) != 0) return false;
    }
  }
  return true;
#else
  return false;
#endif
}

std::shared_ptr<const PackedWeight> CpuKernels::pack(std::span<const WeightRef> parts) {
  std::vector<int64_t> rows;
  for (const WeightRef& w : parts) rows.push_back(w.rows);
  auto pw = std::make_shared<PackedWeight>(rows, parts.empty() ? 0 : parts[0].cols);
  pool_->parallel_for(pw->panels, [&](int64_t p) {
    const size_t part = std::upper_bound(pw->part_panel.begin(), pw->part_panel.end(), p) - pw->part_panel.begin() - 1;
    pack_panel(parts[part], *pw, pw->part_panel[part], p);
  });
  return pw;
}

// Block-quantized weights keep their blocks, repacked for AVX512-VNNI where
// that CPU runs the products (matmul_quant_packed.cpp), whatever the
// precision; a fused set of them is its parts, each prepared.
WeightRef CpuKernels::prepare(const WeightRef& w) {
  WeightRef r = w;
  if (r.packed) return r;
  if (dtype_is_quantized(w.dtype)) {
    if (quant_packs(w.dtype) && quant_isa_best() == QuantIsa::kAvx512Vnni) r.packed = pack_quant(w, pool_);
  } else if (options_.precision == Precision::kBF16) {
    r.packed = pack(std::span<const WeightRef>(&w, 1));
  }
  return r;
}

FusedWeight CpuKernels::fuse(std::span<const WeightRef> parts) {
  FusedWeight f;
  f.parts.assign(parts.begin(), parts.end());
  const bool quantized =
      std::any_of(parts.begin(), parts.end(), [](const WeightRef& w) { return dtype_is_quantized(w.dtype); });
  if (quantized) {
    for (WeightRef& part : f.parts) part = prepare(part);
  } else if (options_.precision == Precision::kBF16) {
    f.packed = pack(parts);
  }
  return f;
}

void CpuKernels::matmul(const float* x, int64_t m, const WeightRef& w, float* y) {
  if (m <= 0 || w.rows <= 0) return;
  if (dtype_is_quantized(w.dtype)) return matmul_quant(x, m, w, y);
  if (options_.precision == Precision::kF32) return matmul_f32(x, m, w, y);
  float* const outs[1] = {y};
  if (w.packed) return matmul_bf16(x, m, *w.packed, outs);
  matmul_bf16(x, m, *pack(std::span<const WeightRef>(&w, 1)), outs);
}

void CpuKernels::matmul(const float* x, int64_t m, const FusedWeight& w, std::span<float* const> outs) {
  if (m <= 0) return;
  if (!w.parts.empty() && std::all_of(w.parts.begin(), w.parts.end(), runs_packed)) {
    const std::vector<const float*> xs(w.parts.size(), x);
    if (m <= kQuantFewRows) return matmul_quant_few(xs, m, w.parts, outs);
    return matmul_quant_many(xs, {}, std::vector<int64_t>(w.parts.size(), m), w.parts, outs);
  }
  if (options_.precision == Precision::kF32 || !w.packed) {
    for (size_t i = 0; i < w.parts.size(); ++i) matmul(x, m, w.parts[i], outs[i]);
    return;
  }
  matmul_bf16(x, m, *w.packed, outs);
}

void CpuKernels::matmul_each(std::span<const float* const> xs, std::span<const WeightRef> ws,
                             std::span<float* const> outs) {
  if (!ws.empty() && std::all_of(ws.begin(), ws.end(), runs_packed)) return matmul_quant_few(xs, 1, ws, outs);
  for (size_t i = 0; i < ws.size(); ++i) matmul(xs[i], 1, ws[i], outs[i]);
}

void CpuKernels::matmul_each(std::span<const float* const> xs, std::span<const int64_t* const> rows,
                             std::span<const int64_t> ms, std::span<const WeightRef> ws,
                             std::span<float* const> outs) {
  if (!ws.empty() && std::all_of(ws.begin(), ws.end(), runs_packed))
    return matmul_quant_many(xs, rows, ms, ws, outs);
  for (size_t i = 0; i < ws.size(); ++i) {
    if (rows.empty() || !rows[i]) {
      matmul(xs[i], ms[i], ws[i], outs[i]);
      continue;
    }
    std::vector<float> picked(ms[i] * ws[i].cols);
    gather_rows(xs[i], rows[i], ms[i], ws[i].cols, picked.data());
    matmul(picked.data(), ms[i], ws[i], outs[i]);
  }
}

void CpuKernels::matmul_bf16(const float* x, int64_t m, const PackedWeight& w, std::span<float* const> outs) {
  FlushSubnormals mode;
  const int64_t ld = 2 * w.pairs;
#if defined(__AVX512BF16__)
  const bool native = native_bf16_ && (m < kFmaMinRows || !fma_many_rows_);
#else
  constexpr bool native = false;
#endif
  // The rows rounded (and, for the fma tiles, widened back to floats) on
  // the pool, into memory left uninitialised (every element is written,
  // padding included): a 512-row step's rows, cleared and converted by the
  // calling thread alone, kept the other threads waiting at each product.
  std::unique_ptr<uint16_t[]> xb(new uint16_t[m * ld]);
  std::unique_ptr<float[]> xf(native ? nullptr : new float[m * ld]);
  for_ranges(m, ld, [&](int64_t r0, int64_t r1) {
    round_rows_to_bf16(x + r0 * w.cols, r1 - r0, w.cols, xb.get() + r0 * ld, ld);
    if (xf)
      for (int64_t i = r0 * ld; i < r1 * ld; ++i) xf[i] = bf16_value(xb[i]);
  });
#if defined(__AVX512BF16__)
  if (native)
    return run_tiles(pool_, xb.get(), ld, m, w, outs, kNative,
                     m <= kNativeOneTileRows ? static_cast<int>(m) : kNativeMr, kCols);
#endif
  run_tiles(pool_, xf.get(), ld, m, w, outs, kFma, kFmaMr, kFmaCols);
}

bool fma_tiles_faster() {
#if defined(__AVX512BF16__)
  static const bool faster = [] {
    if (!native_bf16_agrees()) return false;
    FlushSubnormals mode;
    // One panel of 256 pairs (64 KiB, in L2 as in a prefill) times a tile of
    // each kind's rows; the best of several tries of each, so that a moment
    // of other load on the machine rarely decides.
    constexpr int64_t kPairs = 256, kRows = 12;
    std::unique_ptr<uint32_t, decltype(&std::free)> panel(
        static_cast<uint32_t*>(std::aligned_alloc(64, kPairs * kCols * sizeof(uint32_t))), &std::free);
    if (!panel) return false;
    std::fill_n(panel.get(), kPairs * kCols, 0x3f803f80u);
    std::vector<uint16_t> xb(kRows * 2 * kPairs, 0x3f80);
    std::vector<float> xf(kRows * 2 * kPairs, 1.0f), y(kRows * kCols);
    auto best_seconds = [&](auto&& run) {
      double best = 1e9;
      for (int t = 0; t < 7; ++t) {
        const auto t0 = std::chrono::steady_clock::now();
        for (int r = 0; r < 8; ++r) run();
        best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      }
      return best;
    };
    const int64_t ld = 2 * kPairs;
    const double native = best_seconds([&] {
      for (int64_t i = 0; i < kRows; i += kNativeMr)
        kNative[kNativeMr](xb.data() + i * ld, ld, panel.get(), kPairs, y.data() + i * kCols, kCols, kCols);
    });
    const double fma = best_seconds([&] {
      for (int64_t c = 0; c < kCols; c += kFmaCols)
        for (int64_t i = 0; i < kRows; i += kFmaMr)
          kFma[kFmaMr](xf.data() + i * ld, ld, panel.get() + c, kPairs, y.data() + i * kCols + c, kCols, kFmaCols);
    });
    return fma < native;
  }();
  return faster;
#else
  return false;
#endif
}

}  // namespace cpu
}  // namespace sb
