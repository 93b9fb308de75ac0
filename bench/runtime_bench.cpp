// Prefill and decode throughput of the CPU runtime on a generated checkpoint
// (default: qwen3_5 preset 0.8b, the shapes of Qwen3.5-0.8B), per thread
// count, with decode as a fraction of the read-bandwidth bound measured in
// the same run: weight bytes read per decoded token over the best pass of
// the read-only bandwidth probe (bench/read_probe.h) with the same number of
// threads, run before and after the measurements. Beside it, decode against
// the bandwidth of the same moment (this machine's drifts 2x within minutes):
// 12 chunks, each between two probe passes and about as long as both, each
// chunk's weight GB/s over the mean of its two passes; the median and range
// are printed, and the median again counting the recurrent state, which every
// token reads and writes whole, beside the weights.
//
// usage: runtime_bench [--arch qwen3_5] [--preset 0.8b] [--dir DIR | --model FILE.gguf] [--threads 1,2]
//                      [--prefill 512[,2048]] [--decode 32] [--reps 1] [--precision bf16|f32] [--json] [--help]
//
//        runtime_bench --probe PASSES [--threads 1,2] [--json]
//
// --probe runs only the read probe, PASSES timed passes per thread count, and
// prints them (--json: read_bandwidth and read_bandwidth_passes, as in the
// full report): the bandwidth of a moment, for another engine's run beside it.
//
// --model runs a GGUF file (any type `--model` takes elsewhere) and reports
// the process's resident memory after loading it and after the first decode
// (every weight touched) beside the file's size: the file is mapped, so the
// weights should cost about the file and no second copy.
//
// Each prefill length runs on a fresh State, and so does decode (from an
// empty context, as llama-bench's tg test). --reps repeats every
// measurement; the table shows the best (least disturbed) of them, as tokens
// per second of wall clock and, in brackets, of CPU time (process CPU seconds
// over the thread count: less disturbed by other work on a shared machine;
// idle workers spin briefly, which counts as CPU time). --json prints every
// sample in the layout of `llama-bench -o json` (test, n_threads, samples_ts,
// avg_ts) so that a script reads both tools' results alike.
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "bench/bench_flags.h"
#include "bench/bench_model.h"
#include "bench/read_probe.h"
#include "bench/run_conditions.h"
#include "common/args.h"
#include "common/memory_tuning.h"
#include "model/checkpoint.h"
#include "model/gguf_model.h"
#include "model/model.h"
#include "runtime/cpu/backend.h"

using namespace sb;

namespace {

// Resident set size of this process in bytes (0 where /proc is absent).
uint64_t resident_bytes() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("VmRSS:", 0) == 0) return 1024 * std::strtoull(line.c_str() + 6, nullptr, 10);
  return 0;
}

// The weights a benchmark runs: a checkpoint directory (--dir, or the
// preset's generated one) or a GGUF file (--model); its config and the bytes
// read per decoded token (every matrix once; a tied embedding as the head,
// an untied one not at all: a lookup reads one row; of the routed experts,
// the n_experts_per_tok of n_experts a token is sent to; of qwen4exp's n-gram
// table, the rows a token hashes to).
struct Weights {
  std::string path;
  ModelConfig config;
  uint64_t bytes_per_token = 0;
  uint64_t file_bytes = 0;  // a GGUF file's size; 0 for a directory
  // qwen4exp's n-gram tables (all PLE layers'), and what one decoded token
  // reads of them: one row per n-gram head and PLE layer (model/ngram_table.h).
  uint64_t ngram_table_bytes = 0;
  uint64_t ngram_bytes_per_token = 0;
};

bool is_ngram_table(const std::string& name) {
  return name == "per_layer_token_embd.weight" || name.find("ngram_embedding.shard_") != std::string::npos;
}

bool is_routed_expert(const std::string& name) {
  return name.find(".experts.") != std::string::npos || name.find("_exps.") != std::string::npos;
}

void count_bytes_per_token(const Checkpoint& ckpt, const ModelConfig& config, Weights* out) {
  uint64_t bytes = 0, expert_bytes = 0, table_rows = 0;
  for (const auto& [name, t] : ckpt.tensors()) {
    if (is_routed_expert(name)) {
      expert_bytes += t.nbytes;
      continue;
    }
    if (!is_ngram_table(name)) {
      bytes += t.nbytes;
      continue;
    }
    out->ngram_table_bytes += t.nbytes;
    table_rows += static_cast<uint64_t>(t.shape[0]);
  }
  if (!config.tie_word_embeddings) bytes -= ckpt.find(config.tensor_prefix + "embed_tokens.weight")->nbytes;
  if (config.n_experts > 0) bytes += expert_bytes / static_cast<uint64_t>(config.n_experts) *
                                     static_cast<uint64_t>(config.n_experts_per_tok);
  if (table_rows) {  // every row of a table has the same bytes; a token reads ngram_heads() of each layer's
    const uint64_t row_bytes = out->ngram_table_bytes / table_rows;
    out->ngram_bytes_per_token = row_bytes * config.ngram_heads() * config.ple_layers.size();
  }
  out->bytes_per_token = bytes + out->ngram_bytes_per_token;
}

Status open_weights(const Args& args, const std::string& arch, const std::string& preset, Weights* out) {
  if (args.has("model")) {
    out->path = args.get("model");
    if (args.has("dir")) return Status::invalid("--dir and --model exclude each other");
    if (!is_gguf_path(out->path)) return Status::invalid("--model takes a .gguf file; a checkpoint directory is --dir");
    GgufModel gguf;
    SB_RETURN_IF_ERROR(open_gguf_model(out->path, &gguf));
    out->config = gguf.config;
    count_bytes_per_token(*gguf.checkpoint, gguf.config, out);
    struct stat st {};
    if (stat(out->path.c_str(), &st) == 0) out->file_bytes = static_cast<uint64_t>(st.st_size);
    return Status::ok();
  }
  SB_RETURN_IF_ERROR(bench_checkpoint(arch, preset, args.get("dir"), &out->path, &out->config));
  std::unique_ptr<Checkpoint> ckpt;
  SB_RETURN_IF_ERROR(Checkpoint::open(out->path, &ckpt));
  SB_RETURN_IF_ERROR(parse_config(out->path, &out->config));  // --dir may hold another config than the preset
  count_bytes_per_token(*ckpt, out->config, out);
  return Status::ok();
}

struct Sample {
  std::string test;  // pp512, tg32
  int threads = 0;
  std::vector<double> ts, cpu_ts;  // tokens per second of wall clock and of CPU time, one per repetition
  std::vector<bench::WaitShares> waits;  // decode only: what kept it from running, one per repetition
};

constexpr int kPairedChunks = 12;

// Decode chunks each between two probe passes (bench/read_probe.h): per
// chunk, the weight bytes it read per second over the mean of its passes. A
// chunk lasts about as long as its two passes (`tokens_per_second`, the timed
// decode's rate, sets its tokens), so that the decode and the probe sample
// moments of the same length: chunks of a fixed 8 tokens lasted 2 passes on
// the 0.8b files and 20 on the 4b Q8_0 one.
Status decode_beside_probe(Model& model, int threads, uint64_t weight_bytes, double tokens_per_second,
                           std::vector<double>* ratios, int* chunk_tokens) {
  bench::ReadProbe probe(threads);
  State state = model.new_state();
  std::vector<float> logits;
  SB_RETURN_IF_ERROR(model.decode(state, 0, &logits));
  double before = probe.pass();
  const double pass_seconds = static_cast<double>(probe.buffer_bytes()) / before;
  *chunk_tokens = static_cast<int>(std::clamp(std::lround(2 * pass_seconds * tokens_per_second), 1L, 16L));
  int32_t token = 1;
  for (int c = 0; c < kPairedChunks; ++c) {
    const double w0 = bench::wall_seconds();
    for (int i = 0; i < *chunk_tokens; ++i) SB_RETURN_IF_ERROR(model.decode(state, token++, &logits));
    const double gbs = *chunk_tokens * static_cast<double>(weight_bytes) / (bench::wall_seconds() - w0);
    const double after = probe.pass();
    ratios->push_back(gbs / (0.5 * (before + after)));
    before = after;
  }
  return Status::ok();
}

void print_probes(const std::map<int64_t, bench::ReadBandwidth>& probes) {
  for (const auto& [t, probe] : probes)
    std::printf(
        "read bandwidth, %lld threads: best %.1f GB/s (the bound), median %.1f, worst %.1f over %zu passes of %.1f "
        "GB\n",
        static_cast<long long>(t), probe.best() / 1e9, probe.median() / 1e9, probe.worst() / 1e9, probe.passes.size(),
        probe.buffer_bytes / 1e9);
}

// --probe: the probe alone, no model, which compare_llama.py runs between the
// engines' runs so that each engine's decode is set against the bandwidth of
// its own moment, measured alike for all of them.
int probe_only(const std::vector<int64_t>& thread_counts, int passes, bool json) {
  std::map<int64_t, bench::ReadBandwidth> probes;
  for (int64_t t : thread_counts) probes[t] = bench::probe_read_bandwidth(static_cast<int>(t), passes);
  if (json)
    std::printf("{%s}\n", bench::read_bandwidth_json(probes).c_str());
  else
    print_probes(probes);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  sb::tune_memory(argv);
  Args args({"arch", "preset", "dir", "model", "threads", "prefill", "decode", "reps", "precision", "probe"},
            {"json", "help"});
  std::vector<int64_t> thread_counts, prefills;
  int64_t n_decode = 0, reps = 0;
  Status s = args.parse(argc, argv);
  if (s && args.has("help")) {  // scripts probe the flags here
    std::printf(
        "usage: runtime_bench [--arch qwen3_5] [--preset 0.8b] [--dir DIR | --model FILE.gguf] [--threads 1,2]"
        " [--prefill 512[,2048]]"
        " [--decode 32] [--reps 1] [--precision bf16|f32] [--json]\n"
        "       runtime_bench --probe PASSES [--threads 1,2] [--json]\n");
    return 0;
  }
  if (s) s = bench::positive_ints("threads", args.get("threads", "1,2"), ',', &thread_counts);
  if (s) s = bench::positive_ints("prefill", args.get("prefill", "512"), ',', &prefills);
  if (s) s = args.get_int("decode", 32, 1, int64_t{1} << 24, &n_decode);
  if (s) s = args.get_int("reps", 1, 1, 1000, &reps);
  int64_t probe_passes = 0;
  if (s && args.has("probe") && (s = args.get_int("probe", 1, 1, 1000, &probe_passes)))
    return probe_only(thread_counts, static_cast<int>(probe_passes), args.has("json"));
  RuntimeOptions options;
  if (s && args.has("precision")) {
    Precision p;
    if ((s = parse_precision(args.get("precision"), &p))) options.precision = p;
  }
  const std::string arch = args.get("arch", "qwen3_5"), preset = args.get("preset", "0.8b");
  Weights weights;
  if (s) s = open_weights(args, arch, preset, &weights);
  if (!s) return bench::fail(s);
  const std::string& dir = weights.path;
  // A GGUF file's model is its metadata's, whatever --arch and --preset say.
  const std::string model_name = args.has("model") ? std::string(arch_name(weights.config.arch)) : arch + " " + preset;
  const uint64_t weight_bytes = weights.bytes_per_token;
  uint64_t rss_after_load = 0, rss_after_decode = 0;
  bench::HugePageCoverage huge_pages;  // after the first load: the packed weights are most of it
  // Probed before and again after the measurements, so that one busy moment
  // of a shared machine does not set the bound.
  constexpr int kProbePasses = 8;
  std::map<int64_t, bench::ReadBandwidth> probes;
  for (int64_t t : thread_counts) probes[t] = bench::probe_read_bandwidth(static_cast<int>(t), kProbePasses);

  std::mt19937 rng(1);
  std::vector<int32_t> prompt(*std::max_element(prefills.begin(), prefills.end()));
  for (auto& t : prompt) t = static_cast<int32_t>(rng() % 151643);
  std::vector<Sample> samples;
  std::map<int64_t, std::vector<double>> paired;  // per thread count: decode over the probe of the same moment
  std::map<int64_t, int> paired_tokens;           // per thread count: tokens per chunk
  uint64_t recurrent_bytes = 0;                   // the state a decoded token reads and writes whole
  std::string kernels;
  for (int64_t threads : thread_counts) {
    std::unique_ptr<Model> model;
    options.threads = static_cast<int>(threads);
    if (!(s = Model::load(dir, options, cpu_kernels_factory(), &model))) return bench::fail(s);
    kernels = model->kernels_name();
    if (!rss_after_load) {
      rss_after_load = resident_bytes();
      huge_pages = bench::huge_page_coverage();
    }
    const size_t first = samples.size();
    for (int64_t n : prefills) samples.push_back({"pp" + std::to_string(n), static_cast<int>(threads), {}, {}, {}});
    samples.push_back({"tg" + std::to_string(n_decode), static_cast<int>(threads), {}, {}, {}});
    for (int64_t rep = 0; rep < reps; ++rep) {
      for (size_t k = 0; k < prefills.size(); ++k) {
        State state = model->new_state();
        PrefillOutput out;
        const double w0 = bench::wall_seconds(), c0 = bench::process_cpu_seconds();
        if (!(s = model->prefill(state, std::span<const int32_t>(prompt).first(prefills[k]), {}, &out)))
          return bench::fail(s);
        samples[first + k].ts.push_back(prefills[k] / (bench::wall_seconds() - w0));
        samples[first + k].cpu_ts.push_back(prefills[k] * threads / (bench::process_cpu_seconds() - c0));
      }
      State state = model->new_state();
      std::vector<float> logits;
      if (!(s = model->decode(state, 0, &logits))) return bench::fail(s);  // first touch outside the timing
      if (!rss_after_decode) rss_after_decode = resident_bytes();
      const bench::WaitClocks k0 = bench::wait_clocks();
      const double w0 = bench::wall_seconds(), c0 = bench::process_cpu_seconds();
      for (int64_t i = 0; i < n_decode; ++i)
        if (!(s = model->decode(state, static_cast<int32_t>(i % 1000), &logits))) return bench::fail(s);
      const double wall = bench::wall_seconds() - w0;
      samples.back().ts.push_back(n_decode / wall);
      samples.back().cpu_ts.push_back(n_decode * threads / (bench::process_cpu_seconds() - c0));
      samples.back().waits.push_back(bench::wait_shares(k0, bench::wait_clocks(), wall, static_cast<int>(threads)));
    }
    recurrent_bytes = model->new_state().schema().snapshot_bytes();
    const double tg = *std::max_element(samples.back().ts.begin(), samples.back().ts.end());
    if (!(s = decode_beside_probe(*model, static_cast<int>(threads), weight_bytes, tg, &paired[threads],
                                  &paired_tokens[threads])))
      return bench::fail(s);
  }

  for (int64_t t : thread_counts) probes[t].merge(bench::probe_read_bandwidth(static_cast<int>(t), kProbePasses));
  std::map<int64_t, double> bandwidth;
  for (const auto& [t, probe] : probes) bandwidth[t] = probe.best();

  auto best = [](const std::vector<double>& v) { return *std::max_element(v.begin(), v.end()); };
  auto avg = [](const std::vector<double>& v) {
    double sum = 0;
    for (double x : v) sum += x;
    return sum / static_cast<double>(v.size());
  };
  if (args.has("json")) {
    std::printf(
        "{\"model\": \"%s\", \"dir\": \"%s\", \"kernels\": \"%s\", \"weight_bytes_per_token\": %llu, "
        "\"file_bytes\": %llu, \"ngram_table_bytes\": %llu, \"ngram_bytes_per_token\": %llu, "
        "\"rss_after_load\": %llu, \"rss_after_decode\": %llu, \"recurrent_state_bytes\": %llu, "
        "\"anon_bytes\": %llu, \"anon_huge_bytes\": %llu, ",
        model_name.c_str(), dir.c_str(), kernels.c_str(), static_cast<unsigned long long>(weight_bytes),
        static_cast<unsigned long long>(weights.file_bytes), static_cast<unsigned long long>(weights.ngram_table_bytes),
        static_cast<unsigned long long>(weights.ngram_bytes_per_token), static_cast<unsigned long long>(rss_after_load),
        static_cast<unsigned long long>(rss_after_decode), static_cast<unsigned long long>(recurrent_bytes),
        static_cast<unsigned long long>(huge_pages.anon_bytes), static_cast<unsigned long long>(huge_pages.anon_huge_bytes));
    std::printf("%s, \"decode_over_adjacent_probe\": {", bench::read_bandwidth_json(probes).c_str());
    bool first = true;
    for (const auto& [t, ratios] : paired) {
      std::printf("%s\"%lld\": [", first ? "" : ", ", static_cast<long long>(t));
      for (size_t k = 0; k < ratios.size(); ++k) std::printf("%s%.3f", k ? ", " : "", ratios[k]);
      std::printf("]");
      first = false;
    }
    std::printf("},\n \"results\": [\n");
    for (size_t i = 0; i < samples.size(); ++i) {
      const Sample& x = samples[i];
      std::printf("  {\"test\": \"%s\", \"n_threads\": %d, \"avg_ts\": %.3f, \"samples_ts\": [", x.test.c_str(),
                  x.threads, avg(x.ts));
      for (size_t k = 0; k < x.ts.size(); ++k) std::printf("%s%.3f", k ? ", " : "", x.ts[k]);
      std::printf("], \"samples_cpu_ts\": [");
      for (size_t k = 0; k < x.cpu_ts.size(); ++k) std::printf("%s%.3f", k ? ", " : "", x.cpu_ts[k]);
      if (!x.waits.empty()) {
        std::printf("], \"samples_runnable_wait\": [");
        for (size_t k = 0; k < x.waits.size(); ++k) std::printf("%s%.4f", k ? ", " : "", x.waits[k].runnable_wait);
        std::printf("], \"samples_steal\": [");
        for (size_t k = 0; k < x.waits.size(); ++k) std::printf("%s%.4f", k ? ", " : "", x.waits[k].steal);
      }
      std::printf("]}%s\n", i + 1 < samples.size() ? "," : "");
    }
    std::printf(" ]}\n");
    return 0;
  }
  std::printf("model %s (%s), kernels %s, %.2f GB of weights read per decoded token\n", model_name.c_str(), dir.c_str(),
              kernels.c_str(), weight_bytes / 1e9);
  std::printf("| test | threads | t/s, best of %lld [CPU time] | decode / read-bandwidth bound |\n|---|---|---|---|\n",
              static_cast<long long>(reps));
  for (const Sample& x : samples) {
    char frac[32] = "";
    if (x.test.rfind("tg", 0) == 0)
      std::snprintf(frac, sizeof frac, "%.2f", best(x.ts) * weight_bytes / bandwidth[x.threads]);
    std::printf("| %s | %d | %.2f [%.2f] | %s |\n", x.test.c_str(), x.threads, best(x.ts), best(x.cpu_ts), frac);
  }
  for (const Sample& x : samples)
    if (!x.waits.empty()) {
      std::printf("%s, %d threads, per repetition: the threads waited runnable", x.test.c_str(), x.threads);
      for (size_t k = 0; k < x.waits.size(); ++k) std::printf("%s %.0f%%", k ? "," : "", 100 * x.waits[k].runnable_wait);
      std::printf(" of their wall time; the host stole");
      for (size_t k = 0; k < x.waits.size(); ++k) std::printf("%s %.1f%%", k ? "," : "", 100 * x.waits[k].steal);
      std::printf(" of the CPUs\n");
    }
  std::printf("anonymous memory after load: %.1f MB, %.0f%% of it in 2 MiB pages\n", huge_pages.anon_bytes / 1e6,
              100 * huge_pages.share());
  if (weights.file_bytes)
    std::printf("resident memory: %.1f MB after load, %.1f MB after the first decode; file %.1f MB\n",
                rss_after_load / 1e6, rss_after_decode / 1e6, weights.file_bytes / 1e6);
  if (weights.ngram_table_bytes)
    std::printf("n-gram table: %.1f MB mapped, %llu bytes read per decoded token; resident after load over the "
                "file outside it: %.2fx\n",
                weights.ngram_table_bytes / 1e6, static_cast<unsigned long long>(weights.ngram_bytes_per_token),
                weights.file_bytes ? static_cast<double>(rss_after_load) / (weights.file_bytes - weights.ngram_table_bytes)
                                   : 0.0);
  print_probes(probes);
  // The recurrent state (the delta rule's, the convs') is read and written
  // whole by every token: bytes the decode must move beside the weights.
  const double with_state = static_cast<double>(weight_bytes + 2 * recurrent_bytes) / static_cast<double>(weight_bytes);
  for (auto& [t, ratios] : paired) {
    std::sort(ratios.begin(), ratios.end());
    std::printf(
        "decode over the read bandwidth of the same moment, %lld threads: median %.2f (%.2f-%.2f) over %zu chunks of "
        "%d tokens; %.2f counting the recurrent state's %.1f MB read and written per token\n",
        static_cast<long long>(t), ratios[ratios.size() / 2], ratios.front(), ratios.back(), ratios.size(),
        paired_tokens[t], ratios[ratios.size() / 2] * with_state, recurrent_bytes / 1e6);
  }
  return 0;
}
