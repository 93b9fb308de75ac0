// Prefill and decode throughput of the CPU runtime on a generated checkpoint
// (default: qwen3_5 preset 0.8b, the shapes of Qwen3.5-0.8B), per thread
// count, with decode as a fraction of the memory-bandwidth bound measured in
// the same run: weight bytes read per decoded token over a read-only
// bandwidth probe with the same number of threads.
//
// usage: runtime_bench [--arch qwen3_5] [--preset 0.8b] [--dir DIR]
//                      [--threads 1,2] [--prefill 512[,2048]] [--decode 32] [--reps 1] [--json] [--help]
//
// --dir: the checkpoint to run (written there first, bf16, seed 0, when it
// holds none). Each prefill length runs on a fresh State, and so does decode
// (from an empty context, as llama-bench's tg test). --reps repeats every measurement; the table shows the
// best (least disturbed) of them, --json every sample, in the layout of
// `llama-bench -o json` (test name, n_threads, samples_ts, avg_ts), so
// bench/compare_llama.py reads both tools' results alike.
// An unknown flag is an error; --help prints the flags (scripts probe it).
// The checkpoint: bench/bench_model.h (--dir, else a shared one per preset).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "bench/bench_model.h"
#include "cli/args.h"
#include "common/memory_tuning.h"
#include "model/checkpoint.h"
#include "model/model.h"

using namespace sb;

namespace {

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

[[noreturn]] void die(const std::string& message) {
  std::fprintf(stderr, "runtime_bench: %s\n", message.c_str());
  std::exit(2);
}

// Bytes read per second by `threads` threads streaming over disjoint halves of
// a buffer far larger than the caches; best of 3. Reads only: a memcpy probe
// would count every byte twice (read and write).
double read_bandwidth(int threads) {
  const size_t n_words = (size_t(1) << 30) / sizeof(uint64_t);
  std::vector<uint64_t> buf(n_words, 1);
  std::vector<uint64_t> sinks(static_cast<size_t>(threads));
  auto read_slice = [&](int t) {
    const size_t begin = n_words * t / threads, end = n_words * (t + 1) / threads;
    uint64_t acc[8] = {};
    for (size_t i = begin; i + 8 <= end; i += 8)
      for (int k = 0; k < 8; ++k) acc[k] += buf[i + k];
    uint64_t s = 0;
    for (uint64_t a : acc) s += a;
    sinks[static_cast<size_t>(t)] = s;
  };
  double best = 0;
  for (int rep = 0; rep < 4; ++rep) {
    const double t0 = now_s();
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) pool.emplace_back(read_slice, t);
    for (auto& th : pool) th.join();
    const double bw = n_words * sizeof(uint64_t) / (now_s() - t0);
    if (rep > 0) best = std::max(best, bw);  // the first pass faults the pages in
  }
  uint64_t total = 0;
  for (uint64_t s : sinks) total += s;
  if (total != n_words) die("read probe miscounted");  // keeps the reads from being optimised away
  return best;
}

std::vector<int64_t> int_list(const std::string& flag, const std::string& text) {
  std::vector<int64_t> out;
  size_t pos = 0;
  while (pos <= text.size()) {
    const size_t comma = text.find(',', pos);
    const std::string item = text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    char* end = nullptr;
    const long long v = std::strtoll(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || v < 1) die(flag + ": '" + item + "' is not a positive integer");
    out.push_back(v);
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return out;
}

struct Sample {
  std::string test;  // pp512, tg32
  int threads;
  std::vector<double> ts;  // tokens per second, one per repetition
};

}  // namespace

int main(int argc, char** argv) {
  sb::tune_memory(argv);
  Args args({"arch", "preset", "dir", "threads", "prefill", "decode", "reps"}, {"json", "help"});
  if (Status st = args.parse(argc, argv); !st) die(st.message());
  if (args.has("help")) {
    std::printf("usage: runtime_bench [--arch qwen3_5] [--preset 0.8b] [--dir DIR] [--threads 1,2] [--prefill 512[,2048]]"
                " [--decode 32] [--reps 1] [--json]\n");
    return 0;
  }
  const bool json = args.has("json");
  const std::string arch_s = args.get("arch", "qwen3_5"), preset = args.get("preset", "0.8b");
  const std::vector<int64_t> thread_counts = int_list("--threads", args.get("threads", "1,2"));
  const std::vector<int64_t> prefills = int_list("--prefill", args.get("prefill", "512"));
  int64_t n_decode = 0, reps = 0;
  Status s = args.get_int("decode", 32, 1, int64_t{1} << 24, &n_decode);
  if (s) s = args.get_int("reps", 1, 1, 1000, &reps);
  std::string dir;
  ModelConfig config;
  if (s) s = bench_checkpoint(arch_s, preset, args.get("dir"), &dir, &config);
  if (!s) die(s.to_string());
  std::unique_ptr<Checkpoint> ckpt;
  if (!(s = Checkpoint::open(dir, &ckpt))) die(s.to_string());
  if (!(s = parse_config(dir, &config))) die(s.to_string());  // --dir may hold another config than the preset
  // Per decoded token every matrix is read once; a tied embedding is read as the head.
  uint64_t weight_bytes = 0;
  for (const auto& [name, t] : ckpt->tensors()) weight_bytes += t.nbytes;
  if (!config.tie_word_embeddings) weight_bytes -= ckpt->find(config.tensor_prefix + "embed_tokens.weight")->nbytes;
  ckpt.reset();
  std::map<int64_t, double> bandwidth;
  for (int64_t t : thread_counts) bandwidth[t] = read_bandwidth(static_cast<int>(t));

  std::mt19937 rng(1);
  std::vector<int32_t> prompt(*std::max_element(prefills.begin(), prefills.end()));
  for (auto& t : prompt) t = static_cast<int32_t>(rng() % 151643);
  std::vector<Sample> samples;
  for (int64_t threads : thread_counts) {
    std::unique_ptr<Model> model;
    RuntimeOptions options;
    options.threads = static_cast<int>(threads);
    if (!(s = Model::load(dir, options, &model))) die(s.to_string());
    for (int64_t n : prefills) samples.push_back({"pp" + std::to_string(n), static_cast<int>(threads), {}});
    samples.push_back({"tg" + std::to_string(n_decode), static_cast<int>(threads), {}});
    Sample* tg = &samples.back();
    for (int rep = 0; rep < reps; ++rep) {
      for (size_t k = 0; k < prefills.size(); ++k) {
        State state = model->new_state();
        PrefillOutput out;
        const double t0 = now_s();
        if (!(s = model->prefill(state, std::span<const int32_t>(prompt).first(static_cast<size_t>(prefills[k])), {}, &out)))
          die(s.to_string());
        samples[samples.size() - 1 - prefills.size() + k].ts.push_back(prefills[k] / (now_s() - t0));
      }
      // Decode from an empty context, as llama-bench's tg test does.
      State decode_state = model->new_state();
      std::vector<float> logits;
      (void)model->decode(decode_state, 0, &logits);  // first touch outside the timing
      const double t0 = now_s();
      for (int64_t i = 0; i < n_decode; ++i)
        if (!(s = model->decode(decode_state, static_cast<int32_t>(i % 1000), &logits))) die(s.to_string());
      tg->ts.push_back(n_decode / (now_s() - t0));
    }
  }

  auto best = [](const std::vector<double>& v) { return *std::max_element(v.begin(), v.end()); };
  auto avg = [](const std::vector<double>& v) {
    double sum = 0;
    for (double x : v) sum += x;
    return sum / static_cast<double>(v.size());
  };
  if (json) {
    std::printf("{\"model\": \"%s %s\", \"dir\": \"%s\", \"weight_bytes_per_token\": %llu, \"read_bandwidth\": {",
                arch_s.c_str(), preset.c_str(), dir.c_str(), static_cast<unsigned long long>(weight_bytes));
    bool first = true;
    for (const auto& [t, bw] : bandwidth) std::printf("%s\"%lld\": %.0f", first ? "" : ", ", static_cast<long long>(t), bw), first = false;
    std::printf("},\n \"results\": [\n");
    for (size_t i = 0; i < samples.size(); ++i) {
      std::printf("  {\"test\": \"%s\", \"n_threads\": %d, \"avg_ts\": %.3f, \"samples_ts\": [", samples[i].test.c_str(),
                  samples[i].threads, avg(samples[i].ts));
      for (size_t k = 0; k < samples[i].ts.size(); ++k) std::printf("%s%.3f", k ? ", " : "", samples[i].ts[k]);
      std::printf("]}%s\n", i + 1 < samples.size() ? "," : "");
    }
    std::printf(" ]}\n");
    return 0;
  }
  std::printf("model %s preset %s (%s), %.2f GB read per decoded token\n", arch_s.c_str(), preset.c_str(), dir.c_str(),
              weight_bytes / 1e9);
  std::printf("| test | threads | t/s (best of %lld) | decode / read-bandwidth bound |\n|---|---|---|---|\n", static_cast<long long>(reps));
  for (const Sample& x : samples) {
    const double bound = bandwidth[x.threads] / weight_bytes;
    std::string frac = x.test.rfind("tg", 0) == 0 ? std::to_string(best(x.ts) / bound).substr(0, 4) : "";
    std::printf("| %s | %d | %.2f | %s |\n", x.test.c_str(), x.threads, best(x.ts), frac.c_str());
  }
  std::printf("read bandwidth:");
  for (const auto& [t, bw] : bandwidth) std::printf(" %.1f GB/s (%lld threads)", bw / 1e9, static_cast<long long>(t));
  std::printf("\n");
  return 0;
}
