// The matrix product alone, at the shapes of the 0.8b qwen3_5 preset: GFLOP/s
// of each precision for a few row counts, min of N repetitions of CPU time
// (process CPU time / threads, so other load on the machine counts less).
//
// usage: gemm_bench [--threads 1] [--reps 5] [--rows 1,8,64,512] [--shapes NxK,...]
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "runtime/cpu/backend.h"
#include "runtime/kernels.h"
#include "runtime/threads.h"

using namespace sb;

namespace {

double cpu_s() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_stime.tv_sec + 1e-6 * (u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}
double wall_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

std::vector<int64_t> ints(const std::string& s, char sep) {
  std::vector<int64_t> v;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, sep)) v.push_back(std::stoll(item));
  return v;
}

std::string arg(int argc, char** argv, const char* name, const char* fallback) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], name) == 0) return argv[i + 1];
  return fallback;
}

}  // namespace

int main(int argc, char** argv) {
  const int threads = std::stoi(arg(argc, argv, "--threads", "1"));
  const int reps = std::stoi(arg(argc, argv, "--reps", "5"));
  const auto rows = ints(arg(argc, argv, "--rows", "1,8,64,512"), ',');
  // qkv, z, out (delta net); q (gated), o; gate/up, down; the output head.
  std::string shapes = arg(argc, argv, "--shapes", "6144x1024,2048x1024,1024x2048,4096x1024,3584x1024,1024x3584");
  ThreadPool pool(threads);
  std::printf("threads %d, min of %d, GFLOP/s (CPU time / threads; wall in brackets)\n", threads, reps);
  std::printf("| N x K | rows | f32 | bf16 |\n|---|---|---|---|\n");
  std::mt19937 rng(1);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::stringstream ss(shapes);
  std::string shape;
  while (std::getline(ss, shape, ',')) {
    const auto nk = ints(shape, 'x');
    const int64_t N = nk[0], K = nk[1];
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
          const double c0 = cpu_s(), w0 = wall_s();
          k->matmul(x.data(), m, prepared, y.data());
          best_cpu = std::min(best_cpu, (cpu_s() - c0) / threads);
          best_wall = std::min(best_wall, wall_s() - w0);
        }
        const double flop = 2.0 * m * N * K;
        std::printf(" %.1f (%.1f) |", flop / best_cpu / 1e9, flop / best_wall / 1e9);
      }
      std::printf("\n");
    }
  }
  return 0;
}
