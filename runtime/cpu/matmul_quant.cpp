// The quantized product (runtime/quant.h): activation rows quantized once per
// call, then threads over output features, each weight row (or repacked
// group of 16) streamed once per slab of activation rows and multiplied with
// tiles of up to 4 of them. A tile only decides which rows share a weight
// block's decoding; every output element's arithmetic is quant_dot_ref's, so
// a row's bits are the same alone, in any batch, split or thread count.
#include <algorithm>
#include <atomic>

#include "runtime/cpu/cpu_kernels.h"
#include "runtime/cpu/float_mode.h"
#include "runtime/cpu/quant_kernels.h"

#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace sb::cpu {
namespace {

std::atomic<QuantIsa> forced_isa{QuantIsa::kAuto};

void tile_scalar(DType dtype, const uint8_t* w, int64_t row_bytes, int cols, const QuantizedRows& x, int64_t i0,
                 int rows, float* y, int64_t ldy) {
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) y[r * ldy + c] = quant_dot_ref(dtype, w + c * row_bytes, x, i0 + r);
}

#if defined(__x86_64__)
// Clang's __builtin_cpu_supports knows no "f16c": CPUID leaf 1 says it.
bool cpu_has_f16c() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & bit_F16C) != 0;
}
#endif

}  // namespace

const char* quant_isa_name(QuantIsa isa) {
  switch (isa) {
    case QuantIsa::kAuto:
      return "auto";
    case QuantIsa::kScalar:
      return "scalar";
    case QuantIsa::kAvx2:
      return "avx2";
    case QuantIsa::kAvx512Vnni:
      return "avx512vnni";
  }
  return "?";
}

bool quant_isa_supported(QuantIsa isa) {
#if defined(__x86_64__)
  switch (isa) {
    case QuantIsa::kAvx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && cpu_has_f16c();
    case QuantIsa::kAvx512Vnni:
      return quant_isa_supported(QuantIsa::kAvx2) && __builtin_cpu_supports("avx512f") &&
             __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
             __builtin_cpu_supports("avx512vnni");
    default:
      return true;
  }
#else
  return isa == QuantIsa::kScalar || isa == QuantIsa::kAuto;
#endif
}

QuantIsa quant_isa_best() {
  static const QuantIsa best = quant_isa_supported(QuantIsa::kAvx512Vnni) ? QuantIsa::kAvx512Vnni
                               : quant_isa_supported(QuantIsa::kAvx2)     ? QuantIsa::kAvx2
                                                                          : QuantIsa::kScalar;
  return best;
}

QuantTileKernel quant_tile_kernel(QuantIsa isa, BlockOrder order) {
  if (isa == QuantIsa::kAuto) isa = quant_isa_best();
  const bool reversed = order == BlockOrder::kReversedInTiles;
#if defined(__x86_64__)
  if (isa == QuantIsa::kAvx512Vnni) return reversed ? &quant_vnni::tile_reversed : &quant_vnni::tile;
  if (isa == QuantIsa::kAvx2) return reversed ? &quant_avx2::tile_reversed : &quant_avx2::tile;
#endif
  return &tile_scalar;  // the reference: one row at a time, nothing to reverse
}

QuantPackedTileKernel quant_packed_tile_kernel(BlockOrder order) {
#if defined(__x86_64__)
  return order == BlockOrder::kReversedInTiles ? &quant_packed_tile_reversed : &quant_packed_tile;
#else
  (void)order;
  return nullptr;  // nothing is repacked without AVX512-VNNI
#endif
}

void quantize_activations(QuantIsa isa, const float* x, int64_t r0, int64_t r1, QuantizedRows* xq) {
  if (isa == QuantIsa::kAuto) isa = quant_isa_best();
#if defined(__x86_64__)
  if (isa == QuantIsa::kAvx512Vnni) return quant_vnni::quantize_rows(x, r0, r1, xq);
  if (isa == QuantIsa::kAvx2) return quant_avx2::quantize_rows(x, r0, r1, xq);
#endif
  xq->quantize(x, r0, r1);
}

void force_quant_isa(QuantIsa isa) { forced_isa.store(isa); }
QuantIsa quant_isa_in_use() {
  const QuantIsa isa = forced_isa.load();
  return isa == QuantIsa::kAuto ? quant_isa_best() : isa;
}


bool CpuKernels::runs_packed(const WeightRef& w) {
  return dtype_is_quantized(w.dtype) && w.packed && w.packed->quant == w.dtype &&
         quant_isa_in_use() == QuantIsa::kAvx512Vnni;
}

void CpuKernels::matmul_quant(const float* x, int64_t m, const WeightRef& w, float* y) {
  if (m <= kQuantFewRows && runs_packed(w)) {
    const float* const xs[1] = {x};
    float* const outs[1] = {y};
    return matmul_quant_few(xs, m, std::span<const WeightRef>(&w, 1), outs);
  }
  if (runs_packed(w))
    return matmul_quant_many(std::span<const float* const>(&x, 1), {}, std::span<const int64_t>(&m, 1),
                             std::span<const WeightRef>(&w, 1), std::span<float* const>(&y, 1));
  FlushSubnormals mode;
  const int64_t K = w.cols, N = w.rows;
  QuantizedRows xq;
  xq.reset(w.dtype, m, K);
  const QuantIsa isa = quant_isa_in_use();
  for_ranges(m, K, [&](int64_t r0, int64_t r1) { quantize_activations(isa, x + r0 * K, r0, r1, &xq); });
  const QuantTileKernel kernel = quant_tile_kernel(quant_isa_in_use(), block_order_);
  const int64_t row_bytes = dtype_row_bytes(w.dtype, K);
  const uint8_t* data = static_cast<const uint8_t*>(w.data);
  // A task is a run of consecutive weight rows, whole tiles of them (one
  // stretch of memory for the prefetcher in a decode step); slabs of
  // activation rows keep a prefill's quantized rows in L2 while the task's
  // weights stay in L1/L2.
  const int64_t tiles = (N + kQuantTileCols - 1) / kQuantTileCols;
  const int64_t per = std::max<int64_t>(1, tiles / (4 * pool_->size()));
  constexpr int64_t kSlab = 64;
  pool_->parallel_for((tiles + per - 1) / per, [&](int64_t task) {
    const int64_t j0 = task * per * kQuantTileCols, j1 = std::min(N, j0 + per * kQuantTileCols);
    for (int64_t i0 = 0; i0 < m; i0 += kSlab) {
      const int64_t i1 = std::min(m, i0 + kSlab);
      for (int64_t j = j0; j < j1; j += kQuantTileCols) {
        const int cols = static_cast<int>(std::min<int64_t>(kQuantTileCols, j1 - j));
        for (int64_t i = i0; i < i1; i += kQuantTileRows)
          kernel(w.dtype, data + j * row_bytes, row_bytes, cols, xq, i,
                 static_cast<int>(std::min<int64_t>(kQuantTileRows, i1 - i)), y + i * N + j, N);
      }
    }
  });
}

namespace {

// The tiles of one group for activation rows [i0, i1), of equal size (a
// 9-row step as 5 and 4, not 8 and 1): each tile decodes the group's blocks
// once, and a lone row's tile is the slowest per row. y is the group's first
// column of row 0. Both paths below run a group through this, so a row's
// bits never depend on which of them ran it.
void group_tiles(QuantPackedTileKernel tile, DType dtype, const uint8_t* group, const QuantizedRows& xq,
                 const int32_t* offsets, int64_t i0, int64_t i1, float* y, int64_t N, int cols) {
  const int64_t tiles = (i1 - i0 + kQuantPackedTileRows - 1) / kQuantPackedTileRows;
  for (int64_t t = 0; t < tiles; ++t) {
    const int64_t a = i0 + t * (i1 - i0) / tiles, e = i0 + (t + 1) * (i1 - i0) / tiles;
    tile(dtype, group, xq, offsets, a, static_cast<int>(e - a), y + a * N, N, cols);
  }
}

}  // namespace

// Every input quantized once (parts with the same input, type and width
// share it), all inputs' rows in one region; then every part's groups
// numbered one after another in a second, each range of them streamed once
// per slab of 64 rows of its part's input, so a prefill's fused
// projections, or all the experts of a step with their own rows each, take
// two hand-offs where a product per part took two each and quantized the
// same rows again. Ranges are claimed as threads come free
// (ThreadPool::parallel_ranges: each thread's from the front of a share of
// its own, then from the back of another's): at most a sixteenth of a
// thread's share (a range's groups are read again for each slab while they
// stay in L2), shrinking to a group at the end, so that one thread waits for
// the other's last range of about a group.
void CpuKernels::matmul_quant_many(std::span<const float* const> xs, std::span<const int64_t* const> rows_of,
                                   std::span<const int64_t> ms, std::span<const WeightRef> parts,
                                   std::span<float* const> outs) {
  FlushSubnormals mode;
  struct Input {
    const float* x;
    const int64_t* picked;  // its rows of x, or null: x's first q.rows
    int64_t first;          // its first row among all inputs' rows
    QuantizedRows q;
    std::vector<int32_t> offsets;
  };
  std::vector<Input> ins;
  ins.reserve(parts.size());
  std::vector<size_t> input_of(parts.size());
  std::vector<int64_t> first_group(parts.size() + 1, 0);  // part i's groups: [first_group[i], first_group[i + 1])
  int64_t rows = 0, widest = 0, most_rows = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    const WeightRef& w = parts[i];
    const int64_t* picked = rows_of.empty() ? nullptr : rows_of[i];
    size_t k = 0;
    while (k < ins.size() && !(ins[k].x == xs[i] && ins[k].picked == picked && ins[k].q.rows == ms[i] &&
                               ins[k].q.weight == w.dtype && ins[k].q.cols == w.cols))
      ++k;
    if (k == ins.size()) {
      Input& in = ins.emplace_back(Input{xs[i], picked, rows, {}, {}});
      in.q.reset(w.dtype, ms[i], w.cols);
      rows += ms[i], widest = std::max(widest, w.cols);
    }
    input_of[i] = k;
    first_group[i + 1] = first_group[i] + (w.rows + kQuantPackedRows - 1) / kQuantPackedRows;
    most_rows = std::max(most_rows, ms[i]);
  }
  const int64_t groups = first_group.back();
  if (groups == 0 || rows == 0) return;
  const QuantIsa isa = quant_isa_in_use();
  for_ranges(rows, widest, [&](int64_t r0, int64_t r1) {
    for (Input& in : ins) {
      const int64_t a = std::max(r0, in.first) - in.first, e = std::min(r1, in.first + in.q.rows) - in.first;
      if (a < e && !in.picked) quantize_activations(isa, in.x + a * in.q.cols, a, e, &in.q);
      for (int64_t r = a; in.picked && r < e; ++r)
        quantize_activations(isa, in.x + in.picked[r] * in.q.cols, r, r + 1, &in.q);
    }
  });
  for (Input& in : ins) in.offsets = quant_packed_offsets(in.q.weight, in.q);
  const QuantPackedTileKernel tile = quant_packed_tile_kernel(block_order_);
  constexpr int64_t kSlab = 64;
  const int64_t max_groups = std::max<int64_t>(1, groups / (16 * pool_->size()));
  pool_->parallel_ranges(groups, 1, max_groups, [&](int64_t g0, int64_t g1) {
    for (int64_t i0 = 0; i0 < most_rows; i0 += kSlab) {
      size_t i = std::upper_bound(first_group.begin(), first_group.end(), g0) - first_group.begin() - 1;
      for (int64_t g = g0; g < g1; ++g) {
        while (g >= first_group[i + 1]) ++i;
        const WeightRef& w = parts[i];
        const Input& in = ins[input_of[i]];
        if (i0 >= in.q.rows) continue;
        const int64_t local = g - first_group[i], j = local * kQuantPackedRows;
        group_tiles(tile, w.dtype, w.packed->quant_bytes() + local * quant_packed_group_bytes(w.dtype, w.cols),
                    in.q, in.offsets.data(), i0, std::min(in.q.rows, i0 + kSlab), outs[i] + j, w.rows,
                    static_cast<int>(std::min<int64_t>(kQuantPackedRows, w.rows - j)));
      }
    }
  });
}

// A step of a few rows: every part's groups numbered one after another and
// cut into tasks of about equal bytes, in one parallel region, the
// activations quantized on the calling thread (a decode step's row, a
// verify step's 5). Per part a product took its own hand-off and one more
// to quantize (the small ones, a delta-net layer's b and a, ran on the
// calling thread alone while the others waited), and 4 tasks per thread of
// the vocabulary's head were 26 MB each on the 0.8b preset, so a thread
// held up by the machine left the other idle for milliseconds at the end.
void CpuKernels::matmul_quant_few(std::span<const float* const> xs, int64_t m, std::span<const WeightRef> parts,
                                  std::span<float* const> outs) {
  FlushSubnormals mode;
  struct Part {
    const uint8_t* data;
    int64_t first, groups, group_bytes;
    const QuantizedRows* xq;
    std::vector<int32_t> offsets;
  };
  // Activations quantized once per input and weight type among the parts.
  std::vector<QuantizedRows> xqs;
  std::vector<const float*> quantized;  // xqs[k]'s input
  xqs.reserve(parts.size());
  std::vector<Part> ps;
  ps.reserve(parts.size());
  int64_t groups = 0, bytes = 0;
  const QuantIsa isa = quant_isa_in_use();
  for (size_t i = 0; i < parts.size(); ++i) {
    const WeightRef& w = parts[i];
    size_t k = 0;
    while (k < xqs.size() && !(quantized[k] == xs[i] && xqs[k].weight == w.dtype && xqs[k].cols == w.cols)) ++k;
    if (k == xqs.size()) {
      QuantizedRows& q = xqs.emplace_back();
      q.reset(w.dtype, m, w.cols);
      quantize_activations(isa, xs[i], 0, m, &q);
      quantized.push_back(xs[i]);
    }
    Part p{w.packed->quant_bytes(), groups, (w.rows + kQuantPackedRows - 1) / kQuantPackedRows,
           quant_packed_group_bytes(w.dtype, w.cols), &xqs[k], quant_packed_offsets(w.dtype, xqs[k])};
    groups += p.groups;
    bytes += p.groups * p.group_bytes;
    ps.push_back(std::move(p));
  }
  if (groups == 0) return;
  // Ranges of groups claimed as threads come free (ThreadPool::parallel_ranges),
  // none over kMaxTaskBytes, shrinking to a group at the end, for one row
  // and for several alike: a region's tail, where one thread waits for the
  // other's last range, is then about a group; tasks of a fixed size (4 per
  // thread) left it up to a whole task. Each thread's ranges are one run of
  // memory until it turns to the other's share: as ranges of one shared
  // cursor, two threads' alternated, and the verify step of 5 rows ran
  // 1.05x, a decode step 1.01-1.03x slower (docs/kernels.md, "Small steps").
  constexpr int64_t kMaxTaskBytes = int64_t{1} << 20;
  const int64_t group_bytes = std::max<int64_t>(1, bytes / groups);
  const int64_t max_groups = std::max<int64_t>(1, kMaxTaskBytes / group_bytes);
  const QuantPackedTileKernel tile = quant_packed_tile_kernel(block_order_);
  pool_->parallel_ranges(groups, 1, max_groups, [&](int64_t g0, int64_t g1) {
    size_t i = 0;
    while (ps[i].first + ps[i].groups <= g0) ++i;
    for (int64_t g = g0; g < g1; ++g) {
      while (g >= ps[i].first + ps[i].groups) ++i;
      const Part& p = ps[i];
      const int64_t local = g - p.first, j = local * kQuantPackedRows, N = parts[i].rows;
      group_tiles(tile, parts[i].dtype, p.data + local * p.group_bytes, *p.xq, p.offsets.data(), 0, m, outs[i] + j, N,
                  static_cast<int>(std::min<int64_t>(kQuantPackedRows, N - j)));
    }
  });
}

}  // namespace sb::cpu
