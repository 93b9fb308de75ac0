// The bank's promise, end to end on real (tiny, generated) qwen3 and
// qwen3_next checkpoints: every request served through the bank equals the
// same request with the bank bypassed, in tokens and in the bits of every
// logprob; and a deliberately broken restore is seen.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <memory>

#include "bank/bank.h"
#include "bank/chain.h"
#include "bank/compose.h"
#include "bank/ram_tier.h"
#include "engine/engine.h"
#include "tests/engine/equivalence.h"
#include "tests/engine/workload.h"
#include "tests/util/models.h"
#include "tests/util/state_edit.h"
#include "tests/util/tokens.h"

namespace sb {
namespace {

using testing::HarnessReport;
using testing::WorkloadOptions;

constexpr uint32_t kBlock = 64;

void expect_equivalent(const Model& model, const std::string& name, int requests, uint64_t seed) {
  // The harness runs at the default precision of a bf16 checkpoint, bf16
  // (and quantized models are loaded with it): every restore below installs
  // bf16 attention rows.
  for (const ComponentSpec& c : model.schema().components)
    EXPECT_EQ(c.dtype, c.kind == ComponentKind::kRecurrent ? DType::kF32 : DType::kBF16) << c.name;
  testing::HarnessBank s(model, kBlock, 2 * kBlock, 40);
  WorkloadOptions w;
  w.seed = seed;
  w.n_requests = requests;
  w.block_tokens = kBlock;
  w.vocab_size = model.vocab_size();
  const HarnessReport r = s.run(testing::make_workload(w));
  std::printf("%s: %s\n", name.c_str(), r.summary().c_str());
  EXPECT_EQ(r.requests, requests);
  EXPECT_EQ(r.errors, 0) << r.summary();
  EXPECT_EQ(r.mismatches, 0) << r.summary();
  // The harness must have exercised restores and evictions, or it proved nothing.
  EXPECT_GE(r.restored, requests / 4) << r.summary();
  EXPECT_GT(r.evictions, 0);
  EXPECT_GT(s.ram->stats().evictions, 0u);
}

void expect_equivalent(Arch arch, int requests, uint64_t seed) {
  expect_equivalent(testing::shared_model(arch), arch_name(arch), requests, seed);
}

TEST(Equivalence, Qwen3NextEveryResponseEqualsBypass) { expect_equivalent(Arch::kQwen3Next, 300, 11); }
TEST(Equivalence, Qwen3EveryResponseEqualsBypass) { expect_equivalent(Arch::kQwen3, 250, 12); }
// qwen4exp: K, V, raw indexer keys and the pooled(4) table of its QSA
// layers, its GDN states, hyper-connection streams and PLE carry.
TEST(Equivalence, Qwen4ExpEveryResponseEqualsBypass) { expect_equivalent(Arch::kQwen4Exp, 100, 13); }
// Quantized GGUF files made by statebank quantize: the bank's promise holds
// on block-quantized weights too.
TEST(Equivalence, QuantizedGgufEveryResponseEqualsBypass) {
  for (auto [arch, weights] : {std::pair{Arch::kQwen35, testing::Weights::kQ4_K_M},
                               std::pair{Arch::kQwen3Next, testing::Weights::kQ8_0}}) {
    const std::string name = std::string(arch_name(arch)) + " " + testing::weights_name(weights);
    SCOPED_TRACE(name);
    auto model = testing::load_model(testing::model_path(arch, weights), 1, Precision::kBF16);
    ASSERT_TRUE(model);
    EXPECT_NE(model->fingerprint_fields().tensor_dtypes.find(weights == testing::Weights::kQ8_0 ? ":q8_0;" : ":q4_k;"),
              std::string::npos);
    expect_equivalent(*model, name, 120, 14);
  }
}

// Under the bf16 precision a block holds its attention rows (keys, values,
// indexer keys) in bf16: half the bytes per token of the f32 precision's
// block, the recurrent snapshot unchanged (f32 under both). The block holds
// the State's own bytes, so composing it back gives the prefilled State bit
// for bit, and the two precisions' schemas (so their banks) never mix.
TEST(Equivalence, Bf16BlocksHoldHalfTheBytesPerTokenOfF32Blocks) {
  for (Arch arch : {Arch::kQwen3Next, Arch::kQwen4Exp, Arch::kQwen3}) {
    SCOPED_TRACE(arch_name(arch));
    const std::string dir = testing::tiny_checkpoint(arch, 1);
    auto bf16 = testing::load_model(dir, 1, Precision::kBF16);
    auto f32 = testing::load_model(dir, 1, Precision::kF32);
    EXPECT_NE(bf16->fingerprint(), f32->fingerprint());
    EXPECT_NE(bf16->schema().describe(), f32->schema().describe());
    EXPECT_EQ(2 * bf16->schema().block_bytes(kBlock), f32->schema().block_bytes(kBlock));
    EXPECT_EQ(bf16->schema().snapshot_bytes(), f32->schema().snapshot_bytes());
    const auto tokens = testing::random_tokens(3, kBlock);
    uint64_t row_bytes[2] = {0, 0};
    int i = 0;
    for (const Model* m : {bf16.get(), f32.get()}) {
      State s = m->new_state();
      PrefillOptions capture;
      capture.capture_positions = {kBlock};
      PrefillOutput out;
      ASSERT_TRUE(m->prefill(s, tokens, capture, &out).is_ok());
      const Key root = root_key(kBankFormatVersion, m->fingerprint(), "", kBlock);
      const auto keys = chain_keys(root, tokens, kBlock, 1);
      const ObjectRef block = make_block(s, keys[1], keys[0], 0, tokens);
      ASSERT_TRUE(check_block(*block, m->schema(), keys[1], keys[0], 0, tokens).is_ok());
      row_bytes[i++] = block->payload_bytes() - tokens.size() * sizeof(int32_t);
      const ObjectRef snapshot = m->schema().has_recurrent() ? make_snapshot(out.snapshots[0], keys[1]) : nullptr;
      State restored;
      ASSERT_TRUE(compose_state(m->schema(), {&block, 1}, snapshot, &restored).is_ok());
      EXPECT_TRUE(restored.bitwise_equal(s));
    }
    EXPECT_EQ(row_bytes[0], bf16->schema().block_bytes(kBlock));
    EXPECT_EQ(2 * row_bytes[0], row_bytes[1]);
  }
}

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
      if (st.schema().components[c].kind == ComponentKind::kRecurrent)
        mine.emplace_back(st.f32(c).begin(), st.f32(c).end());
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
      if (st.schema().components[c].kind != ComponentKind::kSequence || st.bytes(c).empty()) continue;
      testing::bump_one_bf16_ulp(st, c, testing::stored_values(st, c) / 2);
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
