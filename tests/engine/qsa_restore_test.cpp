// The failure family of issue 7 on statebank_qsa models: a restore that
// leaves the pooled block-key table inconsistent with K, V and the raw
// indexer keys. Sub-prefix restores from a longer chain built by another
// conversation, restores where the donor chain is much longer, the same
// after a restart; and a block whose pooled rows came from other tokens is
// refused by the engine's check, which then serves the request cold.
#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <random>

#include "bank/bank_factory.h"
#include "bank/chain.h"
#include "bank/compose.h"
#include "bank/key.h"
#include "engine/engine.h"
#include "tests/engine/equivalence.h"
#include "tests/util/models.h"
#include "tests/util/temp_dir.h"
#include "tests/util/tokens.h"

namespace sb {
namespace {

constexpr uint32_t kBlock = 64;

// RAM over SSD in `ssd_dir`, or RAM alone when it is empty.
struct Stack : testing::EngineStack {
  Stack(const Model& model, const std::string& ssd_dir)
      : EngineStack(model, options(ssd_dir), kBlock, /*snapshot_every=*/kBlock) {}
  ~Stack() {
    engine.reset();
    EXPECT_TRUE(tiers->flush().is_ok());
  }
  static BankOptions options(const std::string& ssd_dir) {
    BankOptions o;
    o.ram_bytes = 256ull << 20;
    if (!ssd_dir.empty()) {
      o.ssd_mode = SsdMode::kOn;
      o.ssd_dir = ssd_dir;
    }
    return o;
  }
};

std::vector<int32_t> tokens(uint32_t seed, size_t n) { return testing::random_tokens(seed, static_cast<int64_t>(n)); }

CompletionRequest request(std::vector<int32_t> prompt, CacheMode mode = CacheMode::kDefault) {
  CompletionRequest r;
  r.prompt = std::move(prompt);
  r.max_tokens = 4;
  r.top_logprobs = 2;
  r.cache_mode = mode;
  return r;
}

// Serves `prompt` through the bank and bypassed; they must be equal.
RestoreRecord expect_equal_to_bypass(const Engine& engine, const std::vector<int32_t>& prompt) {
  CompletionResult served, bypass;
  EXPECT_TRUE(engine.complete(request(prompt), &served).is_ok());
  EXPECT_TRUE(engine.complete(request(prompt, CacheMode::kBypass), &bypass).is_ok());
  EXPECT_EQ(testing::compare_results(served, bypass), "");
  EXPECT_LE(served.restore.restore_point, served.restore.common_prefix_tokens);
  return served.restore;
}

const Model& qsa() { return testing::shared_model(Arch::kQsa); }

TEST(QsaRestore, SubPrefixOfALongerChainBuiltByAnotherConversation) {
  Stack s(qsa(), "");
  auto donor = tokens(1, 5 * kBlock + 10);
  expect_equal_to_bypass(*s.engine, donor);
  // Shares the donor's first two blocks, then goes its own way.
  auto other = donor;
  other.resize(2 * kBlock);
  auto tail = tokens(2, 50);
  other.insert(other.end(), tail.begin(), tail.end());
  RestoreRecord r = expect_equal_to_bypass(*s.engine, other);
  EXPECT_EQ(r.restore_point, 2 * kBlock);
}

TEST(QsaRestore, BoundaryWhereTheDonorChainIsMuchLonger) {
  Stack s(qsa(), "");
  auto donor = tokens(3, 10 * kBlock + 3);
  expect_equal_to_bypass(*s.engine, donor);
  for (int64_t k : {1, 3, 6}) {
    auto prefix = std::vector<int32_t>(donor.begin(), donor.begin() + k * kBlock + 5);
    RestoreRecord r = expect_equal_to_bypass(*s.engine, prefix);
    EXPECT_EQ(r.restore_point, k * kBlock) << "k=" << k;
  }
}

TEST(QsaRestore, SameAfterARestart) {
  const std::string dir = testing::process_temp_dir() + "/qsa_restart";
  std::filesystem::remove_all(dir);
  auto donor = tokens(4, 8 * kBlock + 7);
  { Stack s(qsa(), dir); expect_equal_to_bypass(*s.engine, donor); }
  {
    Stack s(qsa(), dir);  // empty RAM tier: every object comes from disk
    auto sub = std::vector<int32_t>(donor.begin(), donor.begin() + 2 * kBlock + 1);
    RestoreRecord r = expect_equal_to_bypass(*s.engine, sub);
    EXPECT_EQ(r.restore_point, 2 * kBlock);
    EXPECT_STREQ(r.mode.name(), "ssd");
  }
}

TEST(QsaRestore, PooledRowsFromOtherTokensAreRefusedAndServedCold) {
  Stack s(qsa(), "");
  const Model& m = qsa();
  auto a = tokens(5, kBlock + 9), b = tokens(6, kBlock + 9);
  // A forged first block for prompt b: b's tokens and key, its own K, V and
  // raw keys, but the pooled table of a — right length, wrong conversation.
  State sa = m.new_state(), sb = m.new_state();
  PrefillOutput ignored;
  ASSERT_TRUE(m.prefill(sa, std::span(a).first(kBlock), {}, &ignored).is_ok());
  PrefillOptions capture;
  capture.capture_positions = {kBlock};
  PrefillOutput out_b;
  ASSERT_TRUE(m.prefill(sb, std::span(b).first(kBlock), capture, &out_b).is_ok());
  size_t pooled = 0;
  for (size_t c = 0; c < m.schema().components.size(); ++c)
    if (m.schema().components[c].kind == ComponentKind::kPooled) pooled = c;
  State forged = sb;
  forged.buffer(pooled) = sa.buffer(pooled);
  const Key root = root_key(kBankFormatVersion, m.fingerprint(), "", kBlock);
  auto keys = chain_keys(root, b, kBlock, 1);
  ASSERT_TRUE(s.bank->publish(make_block(forged, keys[1], keys[0], 0, std::span(b).first(kBlock)),
                              Retention::kBlock).is_ok());
  ASSERT_TRUE(s.bank->publish(make_snapshot(out_b.snapshots[0], keys[1]), Retention::kKeep).is_ok());
  CompletionResult served, bypass;
  ASSERT_TRUE(s.engine->complete(request(b, CacheMode::kReadOnly), &served).is_ok());
  ASSERT_TRUE(s.engine->complete(request(b, CacheMode::kBypass), &bypass).is_ok());
  EXPECT_EQ(served.restore.restore_point, 0) << "a forged pooled table was installed";
  EXPECT_GE(served.restore.check_failures, 1);
  EXPECT_EQ(testing::compare_results(served, bypass), "");
}

}  // namespace
}  // namespace sb
