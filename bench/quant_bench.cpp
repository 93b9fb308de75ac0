// The quantized products against bf16 at the shapes of the 0.8b qwen3_5
// preset: per weight format and row count, the weights' GB/s (bytes of the
// weight read per second of a call; each call reads a copy not in cache,
// since the copies together are several times the last-level cache) and the
// calls per second of one pass over every shape, times the rows ("tokens/s",
// one layer of each shape per token, no other work). Beside them the read
// bandwidth of a plain streaming sum over as many bytes: decode (1 row) at
// that bound is the best any format can do. Min of N repetitions (each
// a call on every copy) of CPU time
// per thread (process CPU time / threads, so that other load counts less).
// Last, on AVX512-VNNI, each repacked kernel's own speed with its weights in
// L2, for one row and per product in tiles of 1 to 8 rows
// (packed_tile_rates), and products of 1, 5 and 8 rows streaming from memory
// beside a plain read of the same bytes (packed_stream_rates).
//
// usage: quant_bench [--threads 1] [--reps 5] [--rows 1,64] [--mib 160] [--isa auto|avx2|avx512vnni|scalar]
//                    [--shapes NxK,...]
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <vector>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "bench/bench_flags.h"
#include "bench/read_probe.h"
#include "common/args.h"
#include "runtime/cpu/backend.h"
#include "runtime/cpu/cpu_kernels.h"
#include "runtime/cpu/quant_kernels.h"
#include "runtime/kernels.h"
#include "runtime/quant.h"
#include "runtime/threads.h"

using namespace sb;

namespace {

// One shape's weight in one format, in enough copies to stream from memory.
struct Weights {
  int64_t n = 0, k = 0, row_bytes = 0;
  std::vector<std::vector<uint8_t>> copies;
  WeightRef ref(DType dtype, size_t copy) const { return WeightRef{dtype, n, k, copies[copy].data(), nullptr}; }
};

Weights make_weights(DType dtype, int64_t n, int64_t k, int64_t stream_bytes, std::mt19937& rng) {
  Weights w{n, k, dtype_row_bytes(dtype, k), {}};
  std::normal_distribution<float> nd(0.0f, 0.05f);
  std::vector<float> row(static_cast<size_t>(k));
  std::vector<uint8_t> one(static_cast<size_t>(n * w.row_bytes));
  for (int64_t j = 0; j < n; ++j) {
    for (float& f : row) f = nd(rng);
    uint8_t* out = one.data() + j * w.row_bytes;
    if (dtype == DType::kBF16) {
      for (int64_t i = 0; i < k; ++i) {
        const uint16_t h = f32_to_bf16(row[static_cast<size_t>(i)]);
        std::memcpy(out + 2 * i, &h, 2);
      }
    } else {
      (void)quantize_row(dtype, row.data(), k, out);
    }
  }
  const int64_t copies = std::max<int64_t>(2, stream_bytes / static_cast<int64_t>(one.size()));
  for (int64_t c = 0; c < copies; ++c) w.copies.push_back(one);
  return w;
}

// GB/s of a streaming sum over `bytes` on the pool's threads, each reading
// its own stretch with software prefetch (as the kernels do).
double read_bandwidth(ThreadPool& pool, int64_t bytes, int reps) {
  constexpr int kStreams = 1;
  // On 2 MiB pages, as the kernels' packed weights are (PackedWeight).
  constexpr size_t kHuge = size_t(2) << 20;
  const size_t size = (static_cast<size_t>(bytes) + kHuge - 1) / kHuge * kHuge;
  std::unique_ptr<uint64_t, decltype(&std::free)> mem(static_cast<uint64_t*>(std::aligned_alloc(kHuge, size)),
                                                      &std::free);
  madvise(mem.get(), size, MADV_HUGEPAGE);
  std::span<uint64_t> buf(mem.get(), size / 8);
  std::fill(buf.begin(), buf.end(), 1);
  std::vector<uint64_t> sums(static_cast<size_t>(pool.size()) * kStreams);
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    const double t0 = bench::process_cpu_seconds();
    const int64_t per = static_cast<int64_t>(buf.size()) / pool.size() / kStreams / 8 * 8;
    pool.parallel_for(pool.size(), [&](int64_t t) {
      const uint64_t* base = buf.data() + t * per * kStreams;
#if defined(__AVX512F__)
      __m512i s[kStreams];
      for (auto& v : s) v = _mm512_setzero_si512();
      for (int64_t i = 0; i < per; i += 8)
        for (int l = 0; l < kStreams; ++l) {
          _mm_prefetch(reinterpret_cast<const char*>(base + l * per + i + 1024), _MM_HINT_T0);  // 8 KiB ahead
          s[l] = _mm512_add_epi64(s[l], _mm512_loadu_si512(base + l * per + i));
        }
      alignas(64) uint64_t lanes[8];
      for (int l = 0; l < kStreams; ++l) {
        _mm512_store_si512(lanes, s[l]);
        sums[static_cast<size_t>(t * kStreams + l)] = lanes[0] + lanes[7];
      }
#else
      uint64_t s[kStreams] = {};
      for (int64_t i = 0; i < per; i += 8)
        for (int l = 0; l < kStreams; ++l)
          for (int k = 0; k < 8; ++k) s[l] += base[l * per + i + k];
      for (int l = 0; l < kStreams; ++l) sums[static_cast<size_t>(t * kStreams + l)] = s[l];
#endif
    });
    best = std::min(best, (bench::process_cpu_seconds() - t0) / pool.size());
  }
  return static_cast<double>(bytes) / best / 1e9;
}

Status parse_isa(const std::string& s, cpu::QuantIsa* out) {
  if (s == "auto")
    *out = cpu::QuantIsa::kAuto;
  else if (s == "avx2")
    *out = cpu::QuantIsa::kAvx2;
  else if (s == "avx512vnni")
    *out = cpu::QuantIsa::kAvx512Vnni;
  else if (s == "scalar")
    *out = cpu::QuantIsa::kScalar;
  else
    return Status::invalid("--isa: '" + s + "' is not auto, avx2, avx512vnni or scalar");
  return Status::ok();
}

// The per-call activation quantization alone, per variant: 64 rows of 1024
// floats in blocks of 32 (Q8_0, Q4_0) and of 256 (the K types).
void activation_quantization(int reps, std::mt19937& rng) {
  constexpr int64_t kRows = 64, kCols = 1024;
  std::vector<float> x(kRows * kCols);
  for (float& v : x) v = std::normal_distribution<float>(0.0f, 1.0f)(rng);
  std::printf("\n| activation quantization | blocks of 32: ns per row of %lld | blocks of 256 |\n|---|---|---|\n",
              static_cast<long long>(kCols));
  for (cpu::QuantIsa isa : {cpu::QuantIsa::kScalar, cpu::QuantIsa::kAvx2, cpu::QuantIsa::kAvx512Vnni}) {
    if (!cpu::quant_isa_supported(isa)) continue;
    double ns[2];
    for (int k = 0; k < 2; ++k) {
      QuantizedRows xq;
      xq.reset(k ? DType::kQ4_K : DType::kQ8_0, kRows, kCols);
      double best = 1e30;
      for (int r = 0; r < reps; ++r) {
        const double t0 = bench::process_cpu_seconds();
        for (int i = 0; i < 20; ++i) cpu::quantize_activations(isa, x.data(), 0, kRows, &xq);
        best = std::min(best, (bench::process_cpu_seconds() - t0) / 20);
      }
      ns[k] = best / kRows * 1e9;
    }
    std::printf("| %s | %.0f | %.0f |\n", cpu::quant_isa_name(isa), ns[0], ns[1]);
  }
}

// The repacked kernels' own speed, one activation row against 8 groups of 16
// weight rows of 2560 (a 4b layer's width) that stay in L2: GB/s of packed
// weights per core, best of 50 wall-clock timings of 200 passes. Decode
// streams weights from memory at a fraction of this; how much of it the
// kernel's instructions leave free decides how close to the bound it gets.
void packed_tile_rates(std::mt19937& rng) {
  if (cpu::quant_isa_in_use() != cpu::QuantIsa::kAvx512Vnni) return;
  constexpr int64_t kCols = 2560, kGroups = 8, kRows = kGroups * cpu::kQuantPackedRows;
  constexpr int kTileRows[] = {1, 2, 3, 4, 5, 6, 7, 8};
  std::printf(
      "\n| repacked tile, in L2 | GB/s of weights per core, 1 row | G products/s per core, tiles of 1 / 2 / ... / 8 rows "
      "|\n|---|---|---|\n");
  ThreadPool one(1);
  for (DType dtype : {DType::kQ8_0, DType::kQ6_K, DType::kQ5_K, DType::kQ4_K, DType::kQ4_0, DType::kQ3_K, DType::kQ2_K, DType::kIQ4_XS}) {
    const Weights w = make_weights(dtype, kRows, kCols, 0, rng);  // two copies; the first is packed
    const auto packed = cpu::pack_quant(w.ref(dtype, 0), &one);
    std::vector<float> rows(cpu::kQuantPackedTileRows * kCols);
    for (float& f : rows) f = std::normal_distribution<float>(0.0f, 1.0f)(rng);
    QuantizedRows xq;
    xq.reset(dtype, cpu::kQuantPackedTileRows, kCols);
    xq.quantize(rows.data(), 0, cpu::kQuantPackedTileRows);
    const int64_t group_bytes = cpu::quant_packed_group_bytes(dtype, kCols);
    const std::vector<int32_t> offsets = cpu::quant_packed_offsets(dtype, xq);
    float y[cpu::kQuantPackedTileRows * cpu::kQuantPackedRows];
    double products[std::size(kTileRows)], one_row_gbs = 0;
    for (size_t i = 0; i < std::size(kTileRows); ++i) {
      const int tile_rows = kTileRows[i];
      double best = 1e30;
      for (int rep = 0; rep < 50; ++rep) {
        const auto t0 = std::chrono::steady_clock::now();
        for (int pass = 0; pass < 200 / tile_rows; ++pass)
          for (int64_t g = 0; g < kGroups; ++g)
            cpu::quant_packed_tile(dtype, packed->quant_bytes() + g * group_bytes, xq, offsets.data(), 0, tile_rows, y,
                                   cpu::kQuantPackedRows, cpu::kQuantPackedRows);
        best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      }
      const double passes = 200 / tile_rows;
      products[i] = passes * kRows * kCols * tile_rows / best / 1e9;
      if (tile_rows == 1) one_row_gbs = passes * kGroups * group_bytes / best / 1e9;
    }
    std::printf("| %s | %.1f |", dtype_name(dtype), one_row_gbs);
    for (size_t i = 0; i < std::size(kTileRows); ++i) std::printf("%s%.0f", i ? " / " : " ", products[i]);
    std::printf(" |\n");
  }
}

// "median (lowest-highest)", each as fmt prints it.
std::string spread(std::vector<double> v, const char* fmt) {
  std::sort(v.begin(), v.end());
  const double median = 0.5 * (v[(v.size() - 1) / 2] + v[v.size() / 2]);
  char out[64];
  const std::string f = std::string(fmt) + " (" + fmt + "-" + fmt + ")";
  std::snprintf(out, sizeof out, f.c_str(), median, v.front(), v.back());
  return out;
}

// The passes of packed_stream_rates over one type's copies, each timed as
// GB/s of weights.
struct StreamPasses {
  Kernels& kernels;
  ThreadPool& pool;
  const std::vector<WeightRef>& refs;
  // A pass reads every copy this many times, at least 512 MB: tens of
  // milliseconds, not one hiccup long.
  int rounds;
  double bytes;
  std::vector<uint64_t> sinks;
  StreamPasses(Kernels& k, ThreadPool& p, const std::vector<WeightRef>& r)
      : kernels(k),
        pool(p),
        refs(r),
        rounds(static_cast<int>((size_t(512) << 20) / (r.size() * r[0].packed->bytes) + 1)),
        bytes(static_cast<double>(rounds * r.size() * r[0].packed->bytes)),
        sinks(static_cast<size_t>(p.size())) {}
  // The read-bandwidth probe's loop, each thread a contiguous share.
  double read() {
    return timed(bytes, [&] {
      for (int round = 0; round < rounds; ++round)
        for (const WeightRef& ref : refs)
          pool.parallel_for(pool.size(), [&](int64_t t) {
            const size_t words = ref.packed->bytes / 8, b = words * t / pool.size() / 8 * 8,
                         e = words * (t + 1) / pool.size() / 8 * 8;
            sinks[static_cast<size_t>(t)] +=
                bench::sum_words(reinterpret_cast<const uint64_t*>(ref.packed->data) + b, e - b);
          });
    });
  }
  double product(const float* x, int64_t m, float* y) {
    return timed(bytes, [&] {
      for (int round = 0; round < rounds; ++round)
        for (const WeightRef& ref : refs) kernels.matmul(x, m, ref, y);
    });
  }
  // The m-row tiles on every thread at once, each over the same few groups
  // that stay in its L2 (`l2`): what the arithmetic alone allows now.
  double tiles_in_l2(const PackedWeight& l2, const QuantizedRows& xq, const std::vector<int32_t>& offsets, int m) {
    const DType dtype = l2.quant;
    const int64_t group_bytes = cpu::quant_packed_group_bytes(dtype, l2.cols);
    // From its rows, not its allocation (rounded up).
    const int64_t groups = (l2.part_rows.front() + cpu::kQuantPackedRows - 1) / cpu::kQuantPackedRows;
    const int64_t turn_bytes = groups * group_bytes * pool.size();
    const int64_t turns = std::max<int64_t>(1, (int64_t{256} << 20) / turn_bytes);
    return timed(static_cast<double>(turns * turn_bytes), [&] {
      pool.parallel_for(pool.size(), [&](int64_t) {
        float y[cpu::kQuantPackedTileRows * cpu::kQuantPackedRows];
        for (int64_t turn = 0; turn < turns; ++turn)
          for (int64_t g = 0; g < groups; ++g)
            cpu::quant_packed_tile(dtype, l2.quant_bytes() + g * group_bytes, xq, offsets.data(), 0, m, y,
                                   cpu::kQuantPackedRows, cpu::kQuantPackedRows);
      });
    });
  }
  template <class Pass>
  static double timed(double pass_bytes, Pass pass) {
    const auto t0 = std::chrono::steady_clock::now();
    pass();
    return pass_bytes / std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / 1e9;
  }
};

// Products of 1 row (a decode step's), 5 (a verify step's at depth 4) and 8
// (a batched step's), through Kernels::matmul on the pool's threads,
// streaming their packed weights from memory, beside a plain read of the
// same packed bytes and beside the same rows' tiles with their weights in
// L2, the three alternating pass by pass so that they see the same moments
// of a machine whose bandwidth (and, on a shared host, whose cores' speed)
// drifts. The product over the read says how much of the bandwidth it
// reaches; several rows' products may be bound by their arithmetic instead,
// and the product over the lower of the read and the tiles in L2 is 1 where
// arithmetic and stream overlap whole. A model's step adds its other work
// to this.
void packed_stream_rates(Kernels& kernels, ThreadPool& pool, int64_t stream, std::mt19937& rng) {
  if (cpu::quant_isa_in_use() != cpu::QuantIsa::kAvx512Vnni) return;
  constexpr int64_t kRows = 16384, kCols = 2560;  // a 4b gate/up projection's shape
  constexpr int64_t kL2Rows = 8 * cpu::kQuantPackedRows;  // 8 groups: 0.2-0.4 MB
  constexpr int kPasses = 16;
  std::printf(
      "\n| repacked product of %lldx%lld, from memory, %d threads | rows | plain read of the same bytes, GB/s | "
      "product, GB/s | tiles in L2, GB/s | product / read | product / min(read, tiles in L2) |\n"
      "|---|---|---|---|---|---|---|\n",
      static_cast<long long>(kRows), static_cast<long long>(kCols), pool.size());
  // At least 256 MiB of copies whatever --mib says: two copies (24-45 MB
  // each) stay partly in a 32 MB last-level cache, where a plain read
  // measured up to 94 GB/s.
  const int64_t copies_bytes = std::max<int64_t>(stream, int64_t{256} << 20);
  for (DType dtype : {DType::kQ8_0, DType::kQ6_K, DType::kQ4_K}) {
    Weights w = make_weights(dtype, kRows, kCols, copies_bytes, rng);
    std::vector<WeightRef> refs;
    for (size_t c = 0; c < w.copies.size(); ++c) refs.push_back(kernels.prepare(w.ref(dtype, c)));
    w.copies.clear();  // the packed copies are what is read
    const Weights small = make_weights(dtype, kL2Rows, kCols, 0, rng);
    const auto l2 = cpu::pack_quant(small.ref(dtype, 0), &pool);
    StreamPasses passes(kernels, pool, refs);
    for (int64_t m : {1, 5, 8}) {
      std::vector<float> x(static_cast<size_t>(m * kCols)), y(static_cast<size_t>(m * kRows));
      for (float& v : x) v = std::normal_distribution<float>(0.0f, 1.0f)(rng);
      QuantizedRows xq;
      xq.reset(dtype, m, kCols);
      xq.quantize(x.data(), 0, m);
      const std::vector<int32_t> offsets = cpu::quant_packed_offsets(dtype, xq);
      std::vector<double> read, product, tiles, ratio, overlap;
      for (int pass = 0; pass < kPasses; ++pass) {
        double r = 0, p = 0, t = 0;
        auto read_pass = [&] { r = passes.read(); };
        auto product_pass = [&] { p = passes.product(x.data(), m, y.data()); };
        auto tiles_pass = [&] { t = passes.tiles_in_l2(*l2, xq, offsets, static_cast<int>(m)); };
        if (pass % 2) {  // which goes first alternates too
          product_pass(), tiles_pass(), read_pass();
        } else {
          read_pass(), tiles_pass(), product_pass();
        }
        read.push_back(r), product.push_back(p), tiles.push_back(t);
        ratio.push_back(p / r), overlap.push_back(p / std::min(r, t));
      }
      std::printf("| %s | %lld | %s | %s | %s | %s | %s |\n", dtype_name(dtype), static_cast<long long>(m),
                  spread(read, "%.1f").c_str(), spread(product, "%.1f").c_str(), spread(tiles, "%.1f").c_str(),
                  spread(ratio, "%.2f").c_str(), spread(overlap, "%.2f").c_str());
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  Args args({"threads", "reps", "rows", "mib", "isa", "shapes"}, {});
  int64_t threads = 1, reps = 5, mib = 160;
  std::vector<int64_t> rows;
  std::vector<std::pair<int64_t, int64_t>> shapes;
  cpu::QuantIsa isa = cpu::QuantIsa::kAuto;
  Status s = args.parse(argc, argv);
  if (s) s = args.get_int("threads", 1, 1, 1024, &threads);
  if (s) s = args.get_int("reps", 5, 1, 1000, &reps);
  if (s) s = args.get_int("mib", 160, 1, 1 << 20, &mib);
  if (s) s = bench::positive_ints("rows", args.get("rows", "1,64"), ',', &rows);
  if (s) s = parse_isa(args.get("isa", "auto"), &isa);
  const std::string shapes_text = args.get("shapes", bench::k08bShapes);
  if (s) s = bench::matrix_shapes("shapes", shapes_text, &shapes);
  if (!s) return bench::fail(s);
  const int64_t stream = mib << 20;
  cpu::force_quant_isa(isa);
  ThreadPool pool(static_cast<int>(threads));
  auto kernels = make_cpu_kernels(&pool, {.precision = Precision::kBF16});
  std::printf("threads %d, quantized products on %s, min of %d; read bandwidth %.1f GB/s\n", pool.size(),
              cpu::quant_isa_name(cpu::quant_isa_in_use()), static_cast<int>(reps),
              read_bandwidth(pool, stream, static_cast<int>(reps)));
  std::printf("| format | rows | GB/s per shape (%s) | bytes per pass | tokens/s |\n|---|---|---|---|---|\n",
              shapes_text.c_str());
  std::mt19937 rng(1);
  for (DType dtype : {DType::kBF16, DType::kQ8_0, DType::kQ6_K, DType::kQ5_K, DType::kQ4_K, DType::kQ4_0, DType::kQ3_K,
                      DType::kQ2_K, DType::kIQ4_XS, DType::kIQ4_NL}) {
    std::vector<Weights> ws;
    std::vector<std::vector<WeightRef>> refs;  // per shape, per copy; bf16 prepared (packed) as the model runs it
    for (const auto& [n, k] : shapes) {
      ws.push_back(make_weights(dtype, n, k, stream, rng));
      refs.emplace_back();
      for (size_t c = 0; c < ws.back().copies.size(); ++c)
        refs.back().push_back(kernels->prepare(ws.back().ref(dtype, c)));
      if (dtype == DType::kBF16) ws.back().copies.clear();  // the packed copies are what is read
    }
    for (int64_t m : rows) {
      std::string per_shape;
      double pass = 0, bytes = 0;
      for (size_t s = 0; s < ws.size(); ++s) {
        const Weights& w = ws[s];
        std::vector<float> x(static_cast<size_t>(m * w.k)), y(static_cast<size_t>(m * w.n));
        for (float& v : x) v = std::normal_distribution<float>(0.0f, 1.0f)(rng);
        const double weight_bytes = static_cast<double>(w.n * w.row_bytes);
        // A repetition runs every copy once (each from memory; timed together,
        // since one call is shorter than the CPU clock's resolution).
        double best = 1e30;
        for (int r = 0; r < reps; ++r) {
          const double t0 = bench::process_cpu_seconds();
          for (const WeightRef& ref : refs[s]) kernels->matmul(x.data(), m, ref, y.data());
          best = std::min(best, (bench::process_cpu_seconds() - t0) / threads / static_cast<double>(refs[s].size()));
        }
        char cell[32];
        std::snprintf(cell, sizeof cell, "%s%.1f", s ? " / " : "", weight_bytes / best / 1e9);
        per_shape += cell;
        pass += best;
        bytes += weight_bytes;
      }
      std::printf("| %s | %lld | %s | %.1f MB | %.1f |\n", dtype_name(dtype), static_cast<long long>(m),
                  per_shape.c_str(), bytes / 1e6, static_cast<double>(m) / pass);
    }
  }
  activation_quantization(static_cast<int>(reps), rng);
  packed_tile_rates(rng);
  packed_stream_rates(*kernels, pool, stream, rng);
  return 0;
}
