// Time to first token for one long prompt, cold (empty bank) and restored
// from RAM (the same prompt again), in one run, as a ratio; also checks that
// the two responses are equal bit for bit. Prints the bank bytes per token of
// the model's state schema (blocks: attention rows, bf16 under the bf16
// precision; snapshots: the recurrent state, f32).
//
// usage: ttft_bench [--arch qwen3_5] [--preset 0.8b] [--prompt 16384] [--threads 2] [--block 256]
//                   [--precision bf16|f32] [--dir DIR]
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "bank/bank.h"
#include "bank/ram_tier.h"
#include "bench/bench_flags.h"
#include "bench/bench_model.h"
#include "common/args.h"
#include "common/memory_tuning.h"
#include "engine/engine.h"
#include "model/gen_model.h"
#include "model/model.h"
#include "runtime/cpu/backend.h"

using namespace sb;

namespace {

void print_record(const char* label, const CompletionResult& r) {
  const RestoreRecord& x = r.restore;
  std::printf("%-9s ttft %9.1f ms  mode %-5s restore_point %6lld  prefill_tokens %6lld  lookup %.2f ms  "
              "restore %.1f ms  prefill %.1f ms  bytes_read %.1f MB\n",
              label, r.ttft_ms, x.mode.name(), static_cast<long long>(x.restore_point),
              static_cast<long long>(x.prefill_tokens), x.lookup_ms, x.restore_ms, x.prefill_ms, x.bytes_read / 1e6);
}

}  // namespace

int main(int argc, char** argv) {
  sb::tune_memory(argv);
  Args args({"arch", "preset", "prompt", "threads", "block", "precision", "dir"}, {});
  int64_t n_prompt = 0, threads = 0, block = 0;
  Status s = args.parse(argc, argv);
  if (s) s = args.get_int("prompt", 16384, 2, int64_t{1} << 24, &n_prompt);
  if (s) s = args.get_int("threads", 2, 1, 1024, &threads);
  if (s) s = args.get_int("block", 256, 64, 1 << 20, &block);
  // The same directory runtime_bench uses, so one generated checkpoint serves both.
  std::string dir;
  if (s) s = bench_checkpoint(args.get("arch", "qwen3_5"), args.get("preset", "0.8b"), args.get("dir"), &dir);
  if (!s) return bench::fail(s);
  std::unique_ptr<Model> model;
  RuntimeOptions options;
  options.threads = static_cast<int>(threads);
  if (args.has("precision")) {
    Precision p;
    if (!(s = parse_precision(args.get("precision"), &p))) return bench::fail(s);
    options.precision = p;
  }
  if (!(s = Model::load(dir, options, cpu_kernels_factory(), &model))) return bench::fail(s);
  const StateSchema& schema = model->schema();
  std::printf("state: %.1f bank bytes per token in blocks (%llu per %lld-token block), %llu bytes per snapshot\n",
              static_cast<double>(schema.block_bytes(block)) / static_cast<double>(block),
              static_cast<unsigned long long>(schema.block_bytes(block)), static_cast<long long>(block),
              static_cast<unsigned long long>(schema.snapshot_bytes()));

  RamTier ram(64ULL << 30);
  Bank bank({&ram});
  EngineOptions eo;
  eo.block_tokens = static_cast<uint32_t>(block);
  std::unique_ptr<Engine> engine;
  if (!(s = Engine::create(*model, &bank, eo, &engine))) return bench::fail(s);

  std::mt19937 rng(1);
  CompletionRequest req;
  req.prompt.resize(static_cast<size_t>(n_prompt));
  for (auto& t : req.prompt) t = static_cast<int32_t>(rng() % 151643);
  req.max_tokens = 1;
  std::printf("model %s preset %s, %lld threads, prompt %lld tokens, block %lld\n", args.get("arch", "qwen3_5").c_str(),
              args.get("preset", "0.8b").c_str(), static_cast<long long>(threads), static_cast<long long>(n_prompt),
              static_cast<long long>(block));
  CompletionResult cold, warm;
  if (!(s = engine->complete(req, &cold))) return bench::fail(s);
  print_record("cold", cold);
  if (!(s = engine->complete(req, &warm))) return bench::fail(s);
  print_record("restored", warm);
  const bool equal = cold.tokens.size() == warm.tokens.size() && cold.tokens[0].token == warm.tokens[0].token &&
                     std::memcmp(&cold.tokens[0].logprob, &warm.tokens[0].logprob, sizeof(float)) == 0;
  const TierStats st = ram.stats();
  std::printf("bank after the cold request: %llu blocks, %llu snapshots, %.1f MB\n",
              static_cast<unsigned long long>(st.blocks), static_cast<unsigned long long>(st.snapshots), st.bytes / 1e6);
  std::printf("ttft cold / restored = %.1fx; first token and logprob bits equal: %s\n", cold.ttft_ms / warm.ttft_ms,
              equal ? "yes" : "NO");
  return equal ? 0 : 1;
}
