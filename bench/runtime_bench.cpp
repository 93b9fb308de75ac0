// Prefill and decode throughput of the CPU runtime on a generated checkpoint
// (default: qwen3_5 preset 0.8b, the shapes of Qwen3.5-0.8B), at 1 and 2
// threads, and decode as a ratio to the memory-bandwidth bound measured in
// the same run (weight bytes read per token / copy bandwidth).
//
// usage: runtime_bench [--arch qwen3_5] [--preset 0.8b] [--prefill 512] [--decode 32] [--dir DIR]
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "bench/bench_model.h"
#include "cli/args.h"
#include "common/memory_tuning.h"
#include "model/checkpoint.h"
#include "model/gen_model.h"
#include "model/model.h"

using namespace sb;

namespace {

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// Bytes copied per second by memcpy over a buffer far larger than the caches
// (read + write counted once each, as a copy moves both).
double copy_bandwidth() {
  const size_t n = size_t(1) << 30;
  std::vector<char> a(n, 1), b(n, 2);
  std::memcpy(b.data(), a.data(), n);
  double best = 0;
  for (int rep = 0; rep < 3; ++rep) {
    double t0 = now_s();
    std::memcpy(b.data(), a.data(), n);
    best = std::max(best, 2.0 * n / (now_s() - t0));
  }
  return best;
}

int fail(const Status& s) {
  std::fprintf(stderr, "runtime_bench: %s\n", s.to_string().c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  sb::tune_memory(argv);
  Args args({"arch", "preset", "prefill", "decode", "dir"}, {});
  int64_t n_prefill = 0, n_decode = 0;
  Status s = args.parse(argc, argv);
  if (s) s = args.get_int("prefill", 512, 1, int64_t{1} << 24, &n_prefill);
  if (s) s = args.get_int("decode", 32, 0, int64_t{1} << 24, &n_decode);
  std::string dir;
  ModelConfig config;
  if (s) s = bench_checkpoint(args.get("arch", "qwen3_5"), args.get("preset", "0.8b"), args.get("dir"), &dir, &config);
  if (!s) return fail(s);
  std::unique_ptr<Checkpoint> ckpt;
  if (!(s = Checkpoint::open(dir, &ckpt))) return std::fprintf(stderr, "%s\n", s.to_string().c_str()), 2;
  // Per decoded token every matrix is read once; a tied embedding is read as the head.
  uint64_t weight_bytes = 0;
  for (const auto& [name, t] : ckpt->tensors()) weight_bytes += t.nbytes;
  if (!config.tie_word_embeddings) weight_bytes -= ckpt->find(config.tensor_prefix + "embed_tokens.weight")->nbytes;
  ckpt.reset();
  const double bw = copy_bandwidth();
  std::printf("model %s preset %s, %.2f GB read per decoded token, copy bandwidth %.1f GB/s\n",
              args.get("arch", "qwen3_5").c_str(), args.get("preset", "0.8b").c_str(), weight_bytes / 1e9, bw / 1e9);
  std::printf("| threads | prefill %lld t/s | decode t/s | decode / bandwidth bound |\n|---|---|---|---|\n",
              static_cast<long long>(n_prefill));
  std::mt19937 rng(1);
  std::vector<int32_t> prompt(n_prefill);
  for (auto& t : prompt) t = static_cast<int32_t>(rng() % 151643);
  for (int threads : {1, 2}) {
    std::unique_ptr<Model> model;
    RuntimeOptions options;
    options.threads = threads;
    if (!(s = Model::load(dir, options, &model))) return std::fprintf(stderr, "%s\n", s.to_string().c_str()), 2;
    State state = model->new_state();
    PrefillOutput out;
    double t0 = now_s();
    if (!(s = model->prefill(state, prompt, {}, &out))) return std::fprintf(stderr, "%s\n", s.to_string().c_str()), 2;
    const double prefill_tps = n_prefill / (now_s() - t0);
    std::vector<float> logits;
    int32_t token = 0;
    (void)model->decode(state, token, &logits);  // warm the weights into the page cache path
    t0 = now_s();
    for (int64_t i = 0; i < n_decode; ++i) (void)model->decode(state, static_cast<int32_t>(i % 1000), &logits);
    const double decode_tps = n_decode / (now_s() - t0);
    const double bound = (bw / 2.0) / weight_bytes;  // a streaming read moves half of what a copy moves
    std::printf("| %d | %.1f | %.2f | %.2f |\n", threads, prefill_tps, decode_tps, decode_tps / bound);
  }
  return 0;
}
