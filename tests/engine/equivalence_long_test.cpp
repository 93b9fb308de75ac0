// The equivalence harness at length (label `long`): more requests, longer
// prompts, several seeds, block sizes and snapshot intervals, on qwen3 and
// qwen3_next tiny checkpoints. Every response must equal bypass bit for bit.
#include <gtest/gtest.h>

#include "tests/engine/equivalence.h"
#include "tests/engine/workload.h"
#include "tests/util/models.h"

namespace sb {
namespace {

struct LongCase {
  Arch arch;
  uint32_t block;
  int64_t snapshot_every;
  int budget_blocks;
  uint64_t seed;
  int requests;
};

void run_case(const LongCase& c) {
  const Model& model = testing::shared_model(c.arch);
  testing::HarnessBank h(model, c.block, c.snapshot_every, c.budget_blocks);
  testing::WorkloadOptions w;
  w.seed = c.seed;
  w.n_requests = c.requests;
  w.block_tokens = c.block;
  w.vocab_size = model.vocab_size();
  w.max_prompt_tokens = 16 * c.block + 50;
  w.n_system_prompts = 5;
  const auto r = h.run(testing::make_workload(w));
  std::printf("%s B=%u S=%lld budget=%d seed=%llu: %s\n", arch_name(c.arch), c.block,
              static_cast<long long>(c.snapshot_every), c.budget_blocks, static_cast<unsigned long long>(c.seed),
              r.summary().c_str());
  EXPECT_EQ(r.errors, 0) << r.summary();
  EXPECT_EQ(r.mismatches, 0) << r.summary();
  EXPECT_GE(r.restored, c.requests / 4) << r.summary();
}

TEST(EquivalenceLong, Qwen3NextBlock64) { run_case({Arch::kQwen3Next, 64, 128, 60, 101, 800}); }
TEST(EquivalenceLong, Qwen3NextBlock128NoIntervalTightBudget) { run_case({Arch::kQwen3Next, 128, 0, 12, 102, 500}); }
TEST(EquivalenceLong, Qwen3Block64) { run_case({Arch::kQwen3, 64, 128, 60, 103, 800}); }
TEST(EquivalenceLong, Qwen3Block192) { run_case({Arch::kQwen3, 192, 384, 20, 104, 400}); }

}  // namespace
}  // namespace sb
