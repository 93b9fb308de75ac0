// The equivalence harness: serves each workload request through the bank (in
// its mode) and again with the bank bypassed, and compares the two bit for
// bit: generated tokens, every logprob's bits, top alternatives, echo
// logprobs and finish reason. Also checks the restore record's invariants
// (restore_point <= common_prefix_tokens, a multiple of B, below the prompt
// length, prefill_tokens = n - restore_point).
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "bank/bank_factory.h"
#include "bank/ram_tier.h"
#include "engine/engine.h"
#include "model/model.h"
#include "tests/engine/workload.h"

namespace sb::testing {

struct HarnessReport {
  int requests = 0;
  int restored = 0;        // requests with restore_point > 0
  int64_t restored_tokens = 0;
  int mismatches = 0;      // results that differ from bypass, or broken record invariants
  int errors = 0;          // complete() returned an error
  int evictions = 0;       // eviction steps run
  std::vector<std::string> failures;  // the first few, with the step's description

  std::string summary() const;
};

// Empty when `served` equals `bypass` bit for bit; else what differs.
std::string compare_results(const CompletionResult& served, const CompletionResult& bypass);

// `evict(fraction)` is called for eviction steps (may be empty).
HarnessReport run_equivalence(const Engine& engine, const std::vector<WorkloadStep>& steps,
                              const std::function<void(double)>& evict);

// An Engine over a bank opened by the factory (bank/bank_factory.h), what a
// server process holds: destroying it is a shutdown (the SSD tier writes
// out its queue), building it again a start. Tier log lines are dropped.
// A failure to open is a failure of the calling test.
struct EngineStack {
  EngineStack(const Model& model, BankOptions bank, uint32_t block_tokens, int64_t snapshot_every);
  ~EngineStack();  // the engine first: it refers to the bank

  std::unique_ptr<TieredBank> tiers;
  Bank* bank = nullptr;  // tiers->bank()
  std::unique_ptr<Engine> engine;
};

// An engine over a one-tier RAM bank whose budget holds about `blocks`
// blocks with a snapshot each, small enough that workloads evict on their own.
struct HarnessBank {
  HarnessBank(const Model& model, uint32_t block_tokens, int64_t snapshot_every, int blocks);
  // Runs the workload; its eviction steps shrink the RAM tier by their share
  // and restore the budget.
  HarnessReport run(const std::vector<WorkloadStep>& steps);

  uint64_t budget = 0;
  EngineStack stack;
  RamTier* ram = nullptr;  // stack.tiers->ram()
  Engine* engine = nullptr;
};

// Engine options with blocks of `block_tokens` and a snapshot every two
// blocks: the spacing the one-engine tests restore at.
inline EngineOptions block_options(uint32_t block_tokens) {
  EngineOptions o;
  o.block_tokens = block_tokens;
  o.snapshot_every = 2 * block_tokens;
  return o;
}

// An engine over a one-tier 1 GiB RAM bank, room for every block a small test
// stores, so nothing is evicted. `Tier` is RamTier or a subclass that watches
// its calls. A failure to create the engine is a failure of the calling test.
template <class Tier = RamTier>
struct RamBankEngine {
  RamBankEngine(const Model& m, const EngineOptions& options) : model(m), ram(1ULL << 30), bank({&ram}) {
    EXPECT_TRUE(Engine::create(model, &bank, options, &engine).is_ok());
  }

  const Model& model;
  Tier ram;
  Bank bank;
  std::unique_ptr<Engine> engine;
};

}  // namespace sb::testing
