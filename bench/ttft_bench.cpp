// Time to first token for one long prompt, cold (empty bank) and restored
// from RAM (the same prompt again), in one run, as a ratio; also checks that
// the two responses are equal bit for bit.
//
// usage: ttft_bench [--arch qwen3_5] [--preset 0.8b] [--prompt 16384] [--threads 2] [--block 256] [--dir DIR]
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "common/memory_tuning.h"
#include "bank/bank.h"
#include "bank/ram_tier.h"
#include "engine/engine.h"
#include "model/gen_model.h"
#include "model/model.h"

using namespace sb;

namespace {

std::string arg(int argc, char** argv, const char* name, const char* fallback) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], name) == 0) return argv[i + 1];
  return fallback;
}

int fail(const Status& s) {
  std::fprintf(stderr, "ttft_bench: %s\n", s.to_string().c_str());
  return 2;
}

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
  const std::string arch_s = arg(argc, argv, "--arch", "qwen3_5"), preset = arg(argc, argv, "--preset", "0.8b");
  const int64_t n_prompt = std::stoll(arg(argc, argv, "--prompt", "16384"));
  const int threads = std::stoi(arg(argc, argv, "--threads", "2"));
  const auto block = static_cast<uint32_t>(std::stoul(arg(argc, argv, "--block", "256")));
  std::string dir = arg(argc, argv, "--dir", "");
  Arch arch;
  ModelConfig config;
  Status s = parse_arch(arch_s, &arch);
  if (s) s = preset_config(arch, preset, &config);
  if (!s) return fail(s);
  // The same directory runtime_bench uses, so one generated checkpoint serves both.
  if (dir.empty()) dir = (std::filesystem::temp_directory_path() / ("sb_bench_" + arch_s + "_" + preset)).string();
  if (!std::filesystem::exists(dir + "/config.json")) {
    std::string tok;
    if (!(s = find_tokenizer_dir("", &tok)) || !(s = write_random_checkpoint(config, 0, DType::kBF16, tok, dir)))
      return fail(s);
  }
  std::unique_ptr<Model> model;
  RuntimeOptions options;
  options.threads = threads;
  if (!(s = Model::load(dir, options, &model))) return fail(s);

  RamTier ram(64ULL << 30);
  Bank bank({&ram});
  EngineOptions eo;
  eo.block_tokens = block;
  std::unique_ptr<Engine> engine;
  if (!(s = Engine::create(*model, &bank, eo, &engine))) return fail(s);

  std::mt19937 rng(1);
  CompletionRequest req;
  req.prompt.resize(static_cast<size_t>(n_prompt));
  for (auto& t : req.prompt) t = static_cast<int32_t>(rng() % 151643);
  req.max_tokens = 1;
  std::printf("model %s preset %s, %d threads, prompt %lld tokens, block %u\n", arch_s.c_str(), preset.c_str(), threads,
              static_cast<long long>(n_prompt), block);
  CompletionResult cold, warm;
  if (!(s = engine->complete(req, &cold))) return fail(s);
  print_record("cold", cold);
  if (!(s = engine->complete(req, &warm))) return fail(s);
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
