// The matrix product alone, at the shapes of the 0.8b qwen3_5 preset: GFLOP/s
// of each precision for a few row counts, min of N repetitions of CPU time
// (process CPU time / threads, so other load on the machine counts less).
//
// usage: gemm_bench [--threads 1] [--reps 5] [--rows 1,8,64,512] [--shapes NxK,...]
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "bench/bench_flags.h"
#include "common/args.h"
#include "runtime/cpu/backend.h"
#include "runtime/kernels.h"
#include "runtime/threads.h"

using namespace sb;

int main(int argc, char** argv) {
  Args args({"threads", "reps", "rows", "shapes"}, {});
  int64_t threads = 1, reps = 5;
  std::vector<int64_t> rows;
  std::vector<std::pair<int64_t, int64_t>> shapes;
  Status s = args.parse(argc, argv);
  if (s) s = args.get_int("threads", 1, 1, 1024, &threads);
  if (s) s = args.get_int("reps", 5, 1, 1000, &reps);
  if (s) s = bench::positive_ints("rows", args.get("rows", "1,8,64,512"), ',', &rows);
  if (s) s = bench::matrix_shapes("shapes", args.get("shapes", bench::k08bShapes), &shapes);
  if (!s) return bench::fail(s);
  ThreadPool pool(static_cast<int>(threads));
  std::printf("threads %lld, min of %lld, GFLOP/s (CPU time / threads; wall in brackets)\n",
              static_cast<long long>(threads), static_cast<long long>(reps));
  std::printf("| N x K | rows | f32 | bf16 |\n|---|---|---|---|\n");
  std::mt19937 rng(1);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (const auto& [N, K] : shapes) {
    std::vector<uint16_t> w(N * K);
    for (auto& h : w) {
      const float f = nd(rng) * 0.05f;
      uint32_t b;
      std::memcpy(&b, &f, 4);
      h = static_cast<uint16_t>(b >> 16);
    }
    WeightRef ref{DType::kBF16, N, K, w.data(), nullptr};
    for (int64_t m : rows) {
      std::vector<float> x(m * K), y(m * N);
      for (auto& v : x) v = nd(rng);
      std::printf("| %lldx%lld | %lld |", static_cast<long long>(N), static_cast<long long>(K), static_cast<long long>(m));
      for (Precision p : {Precision::kF32, Precision::kBF16}) {
        KernelOptions o;
        o.precision = p;
        auto k = make_cpu_kernels(&pool, o);
        WeightRef prepared = k->prepare(ref);
        k->matmul(x.data(), m, prepared, y.data());
        double best_cpu = 1e30, best_wall = 1e30;
        for (int r = 0; r < reps; ++r) {
          const double c0 = bench::process_cpu_seconds(), w0 = bench::wall_seconds();
          k->matmul(x.data(), m, prepared, y.data());
          best_cpu = std::min(best_cpu, (bench::process_cpu_seconds() - c0) / threads);
          best_wall = std::min(best_wall, bench::wall_seconds() - w0);
        }
        const double flop = 2.0 * m * N * K;
        std::printf(" %.1f (%.1f) |", flop / best_cpu / 1e9, flop / best_wall / 1e9);
      }
      std::printf("\n");
    }
  }
  return 0;
}
