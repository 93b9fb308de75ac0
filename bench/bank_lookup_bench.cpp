// Lookup time of the bank: a 64k-token prompt against a RAM bank holding 10k
// other chains (plus the prompt's own chain). Prints the time to compute the
// chain keys, to plan a restore (walk, fetch, check every block and the
// snapshot) and to compose the State, for a full hit and for a miss.
// Payloads use a small synthetic schema so that the bank fits in memory; the
// lookup itself does not touch payload bytes except in compose.
//
// usage: bank_lookup_bench [--chains 10000] [--chain-blocks 8] [--prompt 65536] [--block 256]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "bank/bank.h"
#include "bank/chain.h"
#include "bank/compose.h"
#include "bank/key.h"
#include "bank/ram_tier.h"
#include "common/args.h"
#include "common/memory_tuning.h"

using namespace sb;

namespace {

double now_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

StateSchema bench_schema() {
  StateSchema s;
  s.components.push_back({"attn.k", ComponentKind::kSequence, 1, DType::kF32, 2});
  s.components.push_back({"delta", ComponentKind::kRecurrent, 0, DType::kF32, 256});
  return s;
}

// Publishes the blocks of `tokens` with made-up rows and a snapshot every
// `snapshot_every` blocks and at the end.
void publish(Bank& bank, const StateSchema& schema, const std::vector<int32_t>& tokens, uint32_t B,
             int64_t snapshot_every) {
  const int64_t n_blocks = static_cast<int64_t>(tokens.size()) / B;
  const auto keys = chain_keys(root_key(kBankFormatVersion, "bench", "", B), tokens, B, n_blocks);
  for (int64_t k = 0; k < n_blocks; ++k) {
    auto o = std::make_shared<Object>();
    o->kind = ObjectKind::kBlock;
    o->key = keys[k + 1];
    o->parent = keys[k];
    o->position = k * B;
    o->tokens.assign(tokens.begin() + k * B, tokens.begin() + (k + 1) * B);
    o->parts = {f32_part(std::vector<float>(static_cast<size_t>(B) * 2, static_cast<float>(k)))};
    (void)bank.publish(o, Retention::kBlock);
    if ((k + 1) % snapshot_every == 0 || k + 1 == n_blocks) {
      auto s = std::make_shared<Object>();
      s->kind = ObjectKind::kSnapshot;
      s->key = keys[k + 1];
      s->position = (k + 1) * B;
      s->parts = {f32_part(std::vector<float>(256, 1.0f))};
      (void)bank.publish(s, Retention::kThinFirst);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  sb::tune_memory(argv);
  Args args({"chains", "chain-blocks", "prompt", "block"}, {});
  int64_t n_chains = 0, chain_blocks = 0, n_prompt = 0, block = 0;
  Status s = args.parse(argc, argv);
  if (s) s = args.get_int("chains", 10000, 1, int64_t{1} << 30, &n_chains);
  if (s) s = args.get_int("chain-blocks", 8, 1, int64_t{1} << 20, &chain_blocks);
  if (s) s = args.get_int("prompt", 65536, 2, int64_t{1} << 30, &n_prompt);
  if (s) s = args.get_int("block", 256, 1, 1 << 20, &block);
  if (!s) {
    std::fprintf(stderr, "bank_lookup_bench: %s\n", s.message().c_str());
    return 2;
  }
  const auto B = static_cast<uint32_t>(block);
  const StateSchema schema = bench_schema();
  RamTier ram(64ULL << 30);
  Bank bank({&ram});
  std::mt19937 rng(1);
  auto random_tokens = [&](int64_t n) {
    std::vector<int32_t> t(static_cast<size_t>(n));
    for (auto& x : t) x = static_cast<int32_t>(rng() % 151643);
    return t;
  };
  double t0 = now_ms();
  for (int64_t c = 0; c < n_chains; ++c) publish(bank, schema, random_tokens(chain_blocks * B), B, 4);
  const auto prompt = random_tokens(n_prompt);
  publish(bank, schema, prompt, B, 8);
  const TierStats st = ram.stats();
  std::printf("bank: %lld chains of %lld blocks + one of %lld tokens; %llu blocks, %llu snapshots, %.1f MB (built in %.0f ms)\n",
              static_cast<long long>(n_chains), static_cast<long long>(chain_blocks), static_cast<long long>(n_prompt),
              static_cast<unsigned long long>(st.blocks), static_cast<unsigned long long>(st.snapshots),
              st.bytes / 1e6, now_ms() - t0);

  // Median of 31 runs: the machine is shared, and a median is robust to
  // another process taking the core for a while.
  auto measure = [&](const char* label, const std::vector<int32_t>& p) {
    const int reps = 31;
    std::vector<double> keys_ms, plan_ms, compose_ms, total_ms;
    RestorePlan plan;
    for (int r = 0; r < reps; ++r) {
      double a = now_ms();
      const int64_t m = (static_cast<int64_t>(p.size()) - 1) / B;
      const auto keys = chain_keys(root_key(kBankFormatVersion, "bench", "", B), p, B, m);
      double b = now_ms();
      if (!bank.plan_restore(schema, keys, p, B, &plan).is_ok()) return;
      double c = now_ms();
      State state;
      if (!compose_state(schema, plan.blocks, plan.snapshot, &state).is_ok()) return;
      double d = now_ms();
      keys_ms.push_back(b - a);
      plan_ms.push_back(c - b);
      compose_ms.push_back(d - c);
      total_ms.push_back(c - a);
    }
    auto median = [](std::vector<double> v) {
      std::sort(v.begin(), v.end());
      return v[v.size() / 2];
    };
    std::printf("%-28s restore_point %6lld: keys %.3f ms, plan (walk+fetch+check) %.3f ms, compose %.3f ms, "
                "lookup (keys+plan) %.3f ms (medians of %d)\n",
                label, static_cast<long long>(plan.restore_point), median(keys_ms), median(plan_ms),
                median(compose_ms), median(total_ms), reps);
  };
  measure("64k prompt, full hit", prompt);
  auto diverged = prompt;
  diverged[static_cast<size_t>(n_prompt / 2)] ^= 1;
  measure("64k prompt, diverges at 32k", diverged);
  measure("64k prompt, miss", random_tokens(n_prompt));
  return 0;
}
