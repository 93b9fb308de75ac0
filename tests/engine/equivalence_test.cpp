// The bank's promise, end to end on real (tiny, generated) qwen3 and
// qwen3_next checkpoints: every request served through the bank equals the
// same request with the bank bypassed, in tokens and in the bits of every
// logprob; and a deliberately broken restore is seen.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <memory>

#include "bank/bank.h"
#include "bank/ram_tier.h"
#include "engine/engine.h"
#include "tests/engine/equivalence.h"
#include "tests/engine/workload.h"
#include "tests/util/models.h"

namespace sb {
namespace {

using testing::HarnessReport;
using testing::WorkloadOptions;

constexpr uint32_t kBlock = 64;

void expect_equivalent(Arch arch, int requests, uint64_t seed) {
  const Model& model = testing::shared_model(arch);
  testing::HarnessBank s(model, kBlock, 2 * kBlock, 40);
  WorkloadOptions w;
  w.seed = seed;
  w.n_requests = requests;
  w.block_tokens = kBlock;
  w.vocab_size = model.vocab_size();
  const HarnessReport r = s.run(testing::make_workload(w));
  std::printf("%s: %s\n", arch_name(arch), r.summary().c_str());
  EXPECT_EQ(r.requests, requests);
  EXPECT_EQ(r.errors, 0) << r.summary();
  EXPECT_EQ(r.mismatches, 0) << r.summary();
  // The harness must have exercised restores and evictions, or it proved nothing.
  EXPECT_GE(r.restored, requests / 4) << r.summary();
  EXPECT_GT(r.evictions, 0);
  EXPECT_GT(s.ram->stats().evictions, 0u);
}

TEST(Equivalence, Qwen3NextEveryResponseEqualsBypass) { expect_equivalent(Arch::kQwen3Next, 300, 11); }
TEST(Equivalence, Qwen3EveryResponseEqualsBypass) { expect_equivalent(Arch::kQwen3, 250, 12); }
// Indexed sparse attention: K, V, raw indexer keys and the pooled(4) table.
TEST(Equivalence, QsaEveryResponseEqualsBypass) { expect_equivalent(Arch::kQsa, 100, 13); }

// A restore broken on purpose must make the harness fail.
HarnessReport run_broken(Arch arch, std::function<void(State&)> tamper) {
  const Model& model = testing::shared_model(arch);
  testing::HarnessBank s(model, kBlock, 2 * kBlock, 200);
  EngineTestHooks hooks;
  hooks.tamper_restored_state = std::move(tamper);
  s.engine->set_test_hooks(hooks);
  WorkloadOptions w;
  w.seed = 99;
  w.n_requests = 40;
  w.block_tokens = kBlock;
  w.vocab_size = model.vocab_size();
  w.evict_probability = 0;
  return s.run(testing::make_workload(w));
}

TEST(Equivalence, HarnessSeesASnapshotFromAnotherChain) {
  // Installs, into each restored state, the recurrent parts of the previous
  // restore (another chain, or the same chain at another position) when
  // their sizes fit: every check before it passed, so only the comparison
  // with bypass can see it.
  auto previous = std::make_shared<std::vector<std::vector<float>>>();
  auto swapped = std::make_shared<int>(0);
  const HarnessReport r = run_broken(Arch::kQwen3Next, [previous, swapped](State& st) {
    std::vector<std::vector<float>> mine;
    for (size_t c = 0; c < st.n_components(); ++c)
      if (st.schema().components[c].kind == ComponentKind::kRecurrent) mine.push_back(st.buffer(c));
    if (!previous->empty() && *previous != mine) {
      size_t i = 0;
      for (size_t c = 0; c < st.n_components(); ++c)
        if (st.schema().components[c].kind == ComponentKind::kRecurrent) st.set_recurrent(c, (*previous)[i++]);
      ++*swapped;
    }
    *previous = std::move(mine);
  });
  std::printf("broken (foreign snapshot): %s\n", r.summary().c_str());
  ASSERT_GT(*swapped, 0);
  EXPECT_GT(r.mismatches, 0) << r.summary();
}

TEST(Equivalence, HarnessSeesOneUlpInOneRestoredRow) {
  // The smallest damage that can matter: one float of one attention row moved
  // by one ulp of bf16 (2^-8 relative), the resolution at which the default
  // bf16 precision rounds the inputs of its products; a one-ulp fp32 change
  // can vanish in that rounding. The restore still passes every structural
  // check.
  auto touched = std::make_shared<int>(0);
  const HarnessReport r = run_broken(Arch::kQwen3, [touched](State& st) {
    for (size_t c = 0; c < st.n_components(); ++c) {
      if (st.schema().components[c].kind != ComponentKind::kSequence || st.buffer(c).empty()) continue;
      auto& v = st.buffer(c)[st.buffer(c).size() / 2];
      v = std::bit_cast<float>(std::bit_cast<uint32_t>(v) + 0x10000u);
      ++*touched;
      return;
    }
  });
  std::printf("broken (one ulp): %s\n", r.summary().c_str());
  ASSERT_GT(*touched, 0);
  EXPECT_GT(r.mismatches, 0) << r.summary();
}

}  // namespace
}  // namespace sb
