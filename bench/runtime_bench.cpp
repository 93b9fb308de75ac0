// Prefill and decode throughput of the CPU runtime on a generated checkpoint
// (default: qwen3_5 preset 0.8b, the shapes of Qwen3.5-0.8B), and decode as a
// fraction of the read-bandwidth bound measured in the same run (weight bytes
// read per token / a read-only probe's bandwidth at the same thread count).
//
// Each figure is the best of --reps runs. Two rates per figure: wall clock,
// and CPU time (process CPU seconds / threads), which a machine loaded by
// other processes disturbs less; on a quiet machine they agree.
//
// usage: runtime_bench [--arch qwen3_5] [--preset 0.8b] [--prefill 512,2048] [--decode 32]
//                      [--threads 1,2] [--precision bf16|f32] [--reps 3] [--dir DIR]
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/memory_tuning.h"
#include "model/checkpoint.h"
#include "model/gen_model.h"
#include "model/model.h"

using namespace sb;

namespace {

double wall_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
double cpu_s() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_stime.tv_sec + 1e-6 * (u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

struct Timing {
  double wall = 1e30, cpu = 1e30;  // best seconds
  void add(double w, double c) {
    wall = std::min(wall, w);
    cpu = std::min(cpu, c);
  }
};

// Bytes per second that `threads` threads read (and only read) from a buffer
// far larger than the caches: each sums its own slice. Best of 3.
double read_bandwidth(int threads) {
  const size_t n = size_t(1) << 30;
  std::vector<uint64_t> buf(n / 8, 1);
  double best = 0;
  for (int rep = 0; rep < 3; ++rep) {
    std::atomic<uint64_t> sink{0};
    const double t0 = wall_s();
    std::vector<std::thread> ts;
    for (int t = 0; t < threads; ++t)
      ts.emplace_back([&, t] {
        const size_t per = buf.size() / threads;
        const uint64_t* p = buf.data() + t * per;
        uint64_t a = 0, b = 0, c = 0, d = 0;
        for (size_t i = 0; i + 4 <= per; i += 4) a += p[i], b += p[i + 1], c += p[i + 2], d += p[i + 3];
        sink += a + b + c + d;
      });
    for (auto& t : ts) t.join();
    best = std::max(best, n / (wall_s() - t0));
    if (sink.load() == 0) std::printf("?");
  }
  return best;
}

std::string arg(int argc, char** argv, const char* name, const char* fallback) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], name) == 0) return argv[i + 1];
  return fallback;
}

std::vector<int64_t> ints(const std::string& s) {
  std::vector<int64_t> v;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) v.push_back(std::stoll(item));
  return v;
}

int fail(const Status& s) {
  std::fprintf(stderr, "runtime_bench: %s\n", s.to_string().c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  sb::tune_memory(argv);
  const std::string arch_s = arg(argc, argv, "--arch", "qwen3_5"), preset = arg(argc, argv, "--preset", "0.8b");
  const auto prefills = ints(arg(argc, argv, "--prefill", "512"));
  const int64_t n_decode = std::stoll(arg(argc, argv, "--decode", "32"));
  const auto thread_counts = ints(arg(argc, argv, "--threads", "1,2"));
  const int reps = std::stoi(arg(argc, argv, "--reps", "3"));
  const std::string precision_s = arg(argc, argv, "--precision", "");
  std::string dir = arg(argc, argv, "--dir", "");
  Arch arch;
  ModelConfig config;
  Status s = parse_arch(arch_s, &arch);
  if (s) s = preset_config(arch, preset, &config);
  RuntimeOptions options;
  if (s && !precision_s.empty()) {
    Precision p;
    if ((s = parse_precision(precision_s, &p))) options.precision = p;
  }
  if (!s) return fail(s);
  if (dir.empty()) dir = (std::filesystem::temp_directory_path() / ("sb_bench_" + arch_s + "_" + preset)).string();
  if (!std::filesystem::exists(dir + "/config.json")) {
    std::string tok;
    if (!(s = find_tokenizer_dir("", &tok)) || !(s = write_random_checkpoint(config, 0, DType::kBF16, tok, dir)))
      return fail(s);
  }
  std::unique_ptr<Checkpoint> ckpt;
  if (!(s = Checkpoint::open(dir, &ckpt))) return fail(s);
  // Per decoded token every matrix is read once; a tied embedding is read as the head.
  uint64_t weight_bytes = 0;
  for (const auto& [name, t] : ckpt->tensors()) weight_bytes += t.nbytes;
  if (!config.tie_word_embeddings) weight_bytes -= ckpt->find(config.tensor_prefix + "embed_tokens.weight")->nbytes;
  ckpt.reset();
  std::printf("model %s preset %s, %.2f GB of weights read per decoded token; best of %d, t/s wall [CPU time]\n",
              arch_s.c_str(), preset.c_str(), weight_bytes / 1e9, reps);
  std::printf("| threads | kernels |");
  for (int64_t n : prefills) std::printf(" prefill %lld |", static_cast<long long>(n));
  std::printf(" decode | read GB/s | decode / read bound |\n|---|---|");
  for (size_t i = 0; i < prefills.size(); ++i) std::printf("---|");
  std::printf("---|---|---|\n");
  std::mt19937 rng(1);
  for (int64_t threads : thread_counts) {
    options.threads = static_cast<int>(threads);
    std::unique_ptr<Model> model;
    if (!(s = Model::load(dir, options, &model))) return fail(s);
    std::printf("| %lld | %s |", static_cast<long long>(threads), model->kernels_name().c_str());
    std::fflush(stdout);
    State state;
    for (int64_t n : prefills) {
      std::vector<int32_t> prompt(n);
      for (auto& t : prompt) t = static_cast<int32_t>(rng() % 151643);
      Timing t;
      for (int r = 0; r < reps; ++r) {
        state = model->new_state();
        PrefillOutput out;
        const double w0 = wall_s(), c0 = cpu_s();
        if (!(s = model->prefill(state, prompt, {}, &out))) return fail(s);
        t.add(wall_s() - w0, (cpu_s() - c0) / threads);
      }
      std::printf(" %.1f [%.1f] |", n / t.wall, n / t.cpu);
      std::fflush(stdout);
    }
    if (state.position() == 0) {
      state = model->new_state();
      PrefillOutput out;
      const int32_t one[1] = {1};
      if (!(s = model->prefill(state, one, {}, &out))) return fail(s);
    }
    // Decode continues the last prefill, in runs of n_decode tokens.
    std::vector<float> logits;
    (void)model->decode(state, 0, &logits);
    Timing t;
    for (int r = 0; r < reps; ++r) {
      const double w0 = wall_s(), c0 = cpu_s();
      for (int64_t i = 0; i < n_decode; ++i) (void)model->decode(state, static_cast<int32_t>(i % 1000), &logits);
      t.add(wall_s() - w0, (cpu_s() - c0) / threads);
    }
    const double bw = read_bandwidth(static_cast<int>(threads));
    const double bound = bw / weight_bytes;
    std::printf(" %.2f [%.2f] | %.1f | %.2f |\n", n_decode / t.wall, n_decode / t.cpu, bw / 1e9,
                n_decode / t.wall / bound);
  }
  return 0;
}
