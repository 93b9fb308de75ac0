// Bank: lookup over tiers, composition of a restorable prefix, checks and
// fallbacks, promotion, publishing under concurrency. Synthetic schema and
// states (tests/bank/synthetic_state.h): no model needed.
#include "bank/bank.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <random>
#include <set>
#include <thread>

#include "bank/chain.h"
#include "bank/compose.h"
#include "bank/ram_tier.h"
#include "tests/bank/bank_lookup_util.h"
#include "tests/bank/synthetic_state.h"

namespace sb {
namespace {

using namespace sb::testing;

TEST(Bank, RestoresTheLongestPrefixWithASnapshotAndEqualsCold) {
  const auto schema = synthetic_schema();
  RamTier ram(1 << 24);
  Bank bank({&ram});
  const auto tokens = random_tokens(1, 10 * kB);
  publish_chain(bank, schema, tokens, {2, 5, 9});

  // The same prompt: 9 blocks are the most a 10-block prompt may restore.
  auto r = lookup_and_verify(bank, schema, tokens);
  EXPECT_EQ(r.plan.restore_point, 9 * kB);
  EXPECT_EQ(r.plan.matched_tokens, 9 * kB);
  EXPECT_EQ(r.plan.snapshot_position, 9 * kB);
  EXPECT_STREQ(r.plan.mode().name(), "ram");
  EXPECT_EQ(r.plan.blocks.size(), 9u);
  EXPECT_EQ(r.plan.checks, 10);  // 9 blocks and a snapshot
  EXPECT_EQ(r.plan.check_failures, 0);

  // A prompt diverging inside block 7 (token 6B+3): blocks 1..6 match, the
  // last snapshot at or before them is at 5B.
  auto diverged = tokens;
  diverged[6 * kB + 3] += 1;
  r = lookup_and_verify(bank, schema, diverged);
  EXPECT_EQ(r.plan.matched_tokens, 6 * kB);
  EXPECT_EQ(r.plan.restore_point, 5 * kB);

  // Diverging at the first token of a block (kB), and at the last of the one
  // before (kB - 1).
  auto at_boundary = tokens;
  at_boundary[5 * kB] += 1;
  EXPECT_EQ(lookup_and_verify(bank, schema, at_boundary).plan.restore_point, 5 * kB);
  auto before_boundary = tokens;
  before_boundary[5 * kB - 1] += 1;
  EXPECT_EQ(lookup_and_verify(bank, schema, before_boundary).plan.restore_point, 2 * kB);

  // Exactly 5B + 1 tokens: the walk may use 5 blocks.
  std::vector<int32_t> short_prompt(tokens.begin(), tokens.begin() + 5 * kB + 1);
  EXPECT_EQ(lookup_and_verify(bank, schema, short_prompt).plan.restore_point, 5 * kB);
  // Exactly 5B tokens: one token must be left to prefill, so at most 4 blocks.
  short_prompt.pop_back();
  EXPECT_EQ(lookup_and_verify(bank, schema, short_prompt).plan.restore_point, 2 * kB);
}

TEST(Bank, AnotherNamespaceNeverHits) {
  const auto schema = synthetic_schema();
  RamTier ram(1 << 24);
  Bank bank({&ram});
  const auto tokens = random_tokens(2, 4 * kB);
  publish_chain(bank, schema, tokens, {3}, "tenant-a");
  EXPECT_EQ(lookup_and_verify(bank, schema, tokens, "tenant-a").plan.restore_point, 3 * kB);
  auto other = lookup_and_verify(bank, schema, tokens, "tenant-b");
  EXPECT_EQ(other.plan.restore_point, 0);
  EXPECT_EQ(other.plan.matched_tokens, 0);
  EXPECT_STREQ(other.plan.mode().name(), "cold");
  EXPECT_EQ(lookup_and_verify(bank, schema, tokens, "").plan.restore_point, 0);
}

TEST(Bank, AMissingMiddleBlockEndsTheWalk) {
  const auto schema = synthetic_schema();
  RamTier ram(1 << 24);
  Bank bank({&ram});
  const auto tokens = random_tokens(3, 8 * kB);
  publish_chain(bank, schema, tokens, {2, 4, 7});
  const auto keys = chain_keys(root_key(kBankFormatVersion, "fp", "", kB), tokens, kB, 7);
  ASSERT_TRUE(ram.erase(ObjectKind::kBlock, keys[3]));
  auto r = lookup_and_verify(bank, schema, tokens);
  EXPECT_EQ(r.plan.matched_tokens, 2 * kB);  // blocks 4..7 and the snapshot at 7B are never used
  EXPECT_EQ(r.plan.restore_point, 2 * kB);
}

TEST(Bank, ModelWithoutRecurrentStateNeedsNoSnapshot) {
  const auto schema = synthetic_schema(/*with_recurrent=*/false);
  RamTier ram(1 << 24);
  Bank bank({&ram});
  const auto tokens = random_tokens(4, 6 * kB + 3);
  publish_chain(bank, schema, tokens, {});
  auto r = lookup_and_verify(bank, schema, tokens);
  EXPECT_EQ(r.plan.restore_point, 6 * kB);
  EXPECT_FALSE(r.plan.snapshot);
  EXPECT_EQ(r.plan.snapshot_position, 0);
}

// A tier that wraps a RamTier and fails get() with kCorruption for chosen
// names, as a tier whose checksum fails would.
class CorruptingTier : public Tier {
 public:
  explicit CorruptingTier(TierKind kind) : kind_(kind), inner_(1 << 24) {}
  TierKind kind() const override { return kind_; }
  bool contains(ObjectKind kind, const Key& key) const override { return inner_.contains(kind, key); }
  // As a tier must: a copy failing its own check is quarantined and counted.
  Status get(ObjectKind kind, const Key& key, ObjectRef* out) override {
    if (bad_.count({kind, key})) {
      ++own_failures;
      (void)quarantine(kind, key, "checksum mismatch (injected)");
      return Status::corruption("checksum mismatch (injected)");
    }
    return inner_.get(kind, key, out);
  }
  bool quarantine(ObjectKind kind, const Key& key, const std::string& why) override {
    bad_.erase({kind, key});
    return inner_.quarantine(kind, key, why);
  }
  Status put(const ObjectRef& object, Retention retention) override { return inner_.put(object, retention); }
  void get_many(std::span<TierRead> reads) override {
    ++batches;
    batch_reads += reads.size();
    Tier::get_many(reads);
  }
  TierStats stats() const override {
    TierStats s = inner_.stats();
    s.check_failures = own_failures;
    return s;
  }
  void corrupt(ObjectKind kind, const Key& key) { bad_.insert({kind, key}); }
  uint64_t own_failures = 0;
  int batches = 0;
  size_t batch_reads = 0;
  RamTier& inner() { return inner_; }

 private:
  TierKind kind_;
  RamTier inner_;
  std::set<std::pair<ObjectKind, Key>> bad_;
};

TEST(Bank, ACorruptObjectIsAMissAndTheWalkFallsBack) {
  const auto schema = synthetic_schema();
  CorruptingTier tier(TierKind::kRam);
  Bank bank({&tier});
  const auto tokens = random_tokens(5, 8 * kB);
  publish_chain(bank, schema, tokens, {2, 4, 7});
  const auto keys = chain_keys(root_key(kBankFormatVersion, "fp", "", kB), tokens, kB, 7);

  tier.corrupt(ObjectKind::kSnapshot, keys[7]);
  auto r = lookup_and_verify(bank, schema, tokens);
  EXPECT_EQ(r.plan.restore_point, 4 * kB);
  EXPECT_EQ(r.plan.check_failures, 1);

  tier.corrupt(ObjectKind::kBlock, keys[3]);
  r = lookup_and_verify(bank, schema, tokens);
  EXPECT_EQ(r.plan.restore_point, 2 * kB);
  EXPECT_EQ(r.plan.check_failures, 1);  // the snapshot at 7B is not even read: block 3 fails first
  // Each failure counted once, by the tier whose check found it, and each
  // copy taken out of the tier: the next walk meets a hole, not the failure.
  EXPECT_EQ(tier.stats().check_failures, 2u);
  EXPECT_EQ(tier.stats().quarantined, 2u);
  EXPECT_EQ(bank.stats().check_failures, 0u);
  EXPECT_FALSE(tier.contains(ObjectKind::kBlock, keys[3]));
  EXPECT_FALSE(tier.contains(ObjectKind::kSnapshot, keys[7]));
  r = lookup_and_verify(bank, schema, tokens);
  EXPECT_EQ(r.plan.restore_point, 2 * kB);
  EXPECT_EQ(r.plan.check_failures, 0);
  EXPECT_EQ(tier.stats().check_failures, 2u);
}

TEST(Bank, StoredTokensThatDifferFromThePromptAreAMiss) {
  // A block filed under the right key with other tokens (a hash collision,
  // or a bug in whoever wrote it) must never be served.
  const auto schema = synthetic_schema();
  RamTier ram(1 << 24);
  Bank bank({&ram});
  const auto tokens = random_tokens(6, 4 * kB);
  const auto keys = chain_keys(root_key(kBankFormatVersion, "fp", "", kB), tokens, kB, 3);
  auto forged_tokens = tokens;
  forged_tokens[kB + 1] += 7;
  const State forged = synthetic_run(schema, forged_tokens);
  for (int64_t k = 0; k < 3; ++k) {
    const auto& src = k == 1 ? forged_tokens : tokens;
    const State st = synthetic_run(schema, std::span<const int32_t>(src).subspan(0, (k + 1) * kB));
    ASSERT_TRUE(bank.publish(make_block(st, keys[k + 1], keys[k], k * kB,
                                        std::span<const int32_t>(src).subspan(static_cast<size_t>(k) * kB, kB)),
                             Retention::kBlock)
                    .is_ok());
    ASSERT_TRUE(bank.publish(make_snapshot(capture_recurrent(st), keys[k + 1]), Retention::kKeep).is_ok());
  }
  auto r = lookup_and_verify(bank, schema, tokens);
  EXPECT_EQ(r.plan.matched_tokens, 3 * kB);
  EXPECT_EQ(r.plan.restore_point, kB);
  EXPECT_EQ(r.plan.check_failures, 1);

  // Self-healing: the forged block is out of the tier, counted once; the
  // next lookup sees a hole there, and once the right block is published
  // again (what a cold request does) the whole prefix restores.
  EXPECT_FALSE(ram.contains(ObjectKind::kBlock, keys[2]));
  EXPECT_EQ(ram.stats().quarantined, 1u);
  EXPECT_EQ(bank.stats().check_failures, 1u);
  EXPECT_EQ(bank.stats().quarantined, 1u);
  r = lookup_and_verify(bank, schema, tokens);
  EXPECT_EQ(r.plan.matched_tokens, kB);
  EXPECT_EQ(r.plan.check_failures, 0);
  EXPECT_EQ(bank.stats().check_failures, 1u);
  const State right = synthetic_run(schema, std::span<const int32_t>(tokens).subspan(0, 2 * kB));
  ASSERT_TRUE(bank.publish(make_block(right, keys[2], keys[1], kB, std::span<const int32_t>(tokens).subspan(kB, kB)),
                           Retention::kBlock)
                  .is_ok());
  r = lookup_and_verify(bank, schema, tokens);
  EXPECT_EQ(r.plan.restore_point, 3 * kB);
}

TEST(Bank, QuarantineTakesARestoresObjectsOutOfEveryTier) {
  const auto schema = synthetic_schema();
  RamTier ram(1 << 24), lower(1 << 24);
  Bank bank({&ram, &lower});
  const auto tokens = random_tokens(16, 4 * kB);
  publish_chain(bank, schema, tokens, {3});
  const auto keys = chain_keys(root_key(kBankFormatVersion, "fp", "", kB), tokens, kB, 3);
  auto r = lookup_and_verify(bank, schema, tokens);
  ASSERT_EQ(r.plan.restore_point, 3 * kB);
  std::vector<ObjectId> used;
  for (const auto& b : r.plan.blocks) used.push_back(ObjectId{ObjectKind::kBlock, b->key});
  used.push_back(ObjectId{ObjectKind::kSnapshot, r.plan.snapshot->key});
  EXPECT_EQ(bank.quarantine(used, "audit mismatch (test)"), 8u);  // 4 objects x 2 tiers
  EXPECT_EQ(bank.quarantine(used, "again"), 0u) << "a second report finds nothing to remove";
  EXPECT_EQ(bank.stats().quarantined, 8u);
  EXPECT_EQ(ram.stats().quarantined, 4u);
  EXPECT_EQ(lower.stats().quarantined, 4u);
  for (int k = 1; k <= 3; ++k) EXPECT_FALSE(bank.tiers()[1]->contains(ObjectKind::kBlock, keys[k]));
  EXPECT_EQ(lookup_and_verify(bank, schema, tokens).plan.restore_point, 0);
}

TEST(Bank, LowerTierServesPromotesAndReportsTheMode) {
  const auto schema = synthetic_schema();
  RamTier ram(1 << 24);
  CorruptingTier lower(TierKind::kSsd);
  Bank bank({&ram, &lower});
  const auto tokens = random_tokens(7, 6 * kB);
  publish_chain(bank, schema, tokens, {5});
  const auto keys = chain_keys(root_key(kBankFormatVersion, "fp", "", kB), tokens, kB, 5);

  // Only the lower tier holds blocks 3..5 and the snapshot.
  for (int k = 3; k <= 5; ++k) ASSERT_TRUE(ram.erase(ObjectKind::kBlock, keys[k]));
  ASSERT_TRUE(ram.erase(ObjectKind::kSnapshot, keys[5]));
  auto r = lookup_and_verify(bank, schema, tokens);
  EXPECT_EQ(r.plan.restore_point, 5 * kB);
  EXPECT_STREQ(r.plan.mode().name(), "mixed");
  EXPECT_EQ(r.plan.promoted, 4);
  EXPECT_TRUE(ram.contains(ObjectKind::kBlock, keys[4]));
  EXPECT_TRUE(ram.contains(ObjectKind::kSnapshot, keys[5]));
  // Now all of it is in RAM.
  EXPECT_STREQ(lookup_and_verify(bank, schema, tokens).plan.mode().name(), "ram");

  // RAM empty: everything from the lower tier, read in one batch.
  ram.set_budget(0);
  const int batches = lower.batches;
  const size_t batch_reads = lower.batch_reads;
  r = lookup_and_verify(bank, schema, tokens);
  EXPECT_STREQ(r.plan.mode().name(), "ssd");
  EXPECT_EQ(r.plan.restore_point, 5 * kB);
  EXPECT_EQ(lower.batches, batches + 1);
  EXPECT_EQ(lower.batch_reads, batch_reads + 6);  // 5 blocks and the snapshot

  // A corrupt copy in RAM is a miss there; the good copy below serves.
  // (The good copy sits in a tier of another kind, so that "mixed" shows it.)
  CorruptingTier bad_ram(TierKind::kRam);
  CorruptingTier good(TierKind::kSsd);
  Bank bank2({&bad_ram, &good});
  publish_chain(bank2, schema, tokens, {5});
  bad_ram.corrupt(ObjectKind::kBlock, keys[2]);
  r = lookup_and_verify(bank2, schema, tokens);
  EXPECT_EQ(r.plan.restore_point, 5 * kB);
  EXPECT_EQ(r.plan.check_failures, 1);
  EXPECT_STREQ(r.plan.mode().name(), "mixed");
}

TEST(Bank, ConcurrentPublishersOfTheSameChainStoreItOnce) {
  const auto schema = synthetic_schema();
  RamTier ram(1 << 26);
  Bank bank({&ram});
  const auto tokens = random_tokens(8, 16 * kB);
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i)
    threads.emplace_back([&, i] {
      // Each thread publishes the shared prefix and a private tail, then
      // restores its own prompt.
      auto own = tokens;
      own.resize(12 * kB);
      auto tail = random_tokens(100 + i, 4 * kB);
      own.insert(own.end(), tail.begin(), tail.end());
      publish_chain(bank, schema, own, {4, 8, 12, 16});
      auto r = lookup_and_verify(bank, schema, own);
      EXPECT_EQ(r.plan.restore_point, 12 * kB);
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(ram.stats().blocks, 12u + 8u * 4u);
  EXPECT_EQ(ram.stats().snapshots, 3u + 8u * 1u);
}

TEST(Compose, RefusesObjectsThatDoNotFitTheSchemaOrTheChain) {
  const auto schema = synthetic_schema();
  const auto tokens = random_tokens(9, 2 * kB);
  const auto keys = chain_keys(root_key(kBankFormatVersion, "fp", "", kB), tokens, kB, 2);
  const State st = synthetic_run(schema, tokens);
  const auto good = make_block(st, keys[2], keys[1], kB, std::span<const int32_t>(tokens).subspan(kB, kB));
  const auto t = std::span<const int32_t>(tokens).subspan(kB, kB);
  EXPECT_TRUE(check_block(*good, schema, keys[2], keys[1], kB, t).is_ok());
  EXPECT_EQ(check_block(*good, schema, keys[1], keys[1], kB, t).code(), Code::kCorruption);  // wrong name
  EXPECT_EQ(check_block(*good, schema, keys[2], keys[0], kB, t).code(), Code::kCorruption);  // wrong parent
  EXPECT_EQ(check_block(*good, schema, keys[2], keys[1], 0, t).code(), Code::kCorruption);   // wrong position
  auto short_part = std::make_shared<Object>(*good);
  short_part->parts[1].pop_back();
  EXPECT_EQ(check_block(*short_part, schema, keys[2], keys[1], kB, t).code(), Code::kCorruption);
  auto extra = std::make_shared<Object>(*good);
  extra->parts.push_back(f32_part(std::vector<float>{1.0f}));
  EXPECT_EQ(check_block(*extra, schema, keys[2], keys[1], kB, t).code(), Code::kCorruption);
  auto other_dtype = std::make_shared<Object>(*good);  // the right bytes, labelled bf16
  other_dtype->dtype = DType::kBF16;
  EXPECT_EQ(check_block(*other_dtype, schema, keys[2], keys[1], kB, t).code(), Code::kCorruption);

  const auto snap = make_snapshot(capture_recurrent(st), keys[2]);
  EXPECT_TRUE(check_snapshot(*snap, schema, keys[2], 2 * kB).is_ok());
  EXPECT_EQ(check_snapshot(*snap, schema, keys[2], kB).code(), Code::kCorruption);  // filed under another position
  auto short_snap = std::make_shared<Object>(*snap);
  short_snap->parts[0].pop_back();
  EXPECT_EQ(check_snapshot(*short_snap, schema, keys[2], 2 * kB).code(), Code::kCorruption);
  EXPECT_EQ(check_snapshot(*good, schema, keys[2], 2 * kB).code(), Code::kCorruption);  // a block is no snapshot

  // A snapshot from another position is refused by compose too.
  const auto b1 = make_block(st, keys[1], keys[0], 0, std::span<const int32_t>(tokens).subspan(0, kB));
  std::vector<ObjectRef> one = {b1};
  State out;
  EXPECT_EQ(compose_state(schema, one, snap, &out).code(), Code::kCorruption);
  EXPECT_EQ(compose_state(schema, one, nullptr, &out).code(), Code::kCorruption);
}

TEST(RestoreMode, EveryTierHasItsOwnModeAndTheUserVisibleNamesStay) {
  std::set<std::string> names;
  for (size_t i = 0; i < RestoreMode::kCount; ++i) {
    const RestoreMode m = RestoreMode::at(i);
    EXPECT_EQ(m.index(), i);
    EXPECT_TRUE(names.insert(m.name()).second) << m.name();
  }
  for (size_t t = 0; t < kTierKinds; ++t) {
    const auto kind = static_cast<TierKind>(t);
    const RestoreMode m = RestoreMode::from(kind);
    ASSERT_TRUE(m.tier().has_value());
    EXPECT_EQ(*m.tier(), kind);
    EXPECT_STREQ(m.name(), tier_kind_name(kind));
    EXPECT_TRUE(m.restored());
  }
  EXPECT_STREQ(RestoreMode().name(), "cold");
  EXPECT_STREQ(RestoreMode::from(TierKind::kRam).name(), "ram");
  EXPECT_STREQ(RestoreMode::from(TierKind::kSsd).name(), "ssd");
  EXPECT_STREQ(RestoreMode::from(TierKind::kRemote).name(), "remote");
  EXPECT_STREQ(RestoreMode::mixed().name(), "mixed");
  EXPECT_STREQ(RestoreMode::bypass().name(), "bypass");
  EXPECT_TRUE(RestoreMode::mixed().restored());
  EXPECT_FALSE(RestoreMode::cold().restored());
  EXPECT_FALSE(RestoreMode::bypass().restored());
  EXPECT_FALSE(RestoreMode::mixed().tier().has_value());
}

// Miss reasons (docs/bank.md, "The Bank's rules", the miss reason): each obstacle above the restore point, as
// the plan names it. The engine adds bypass, echo and read-only, and a
// composed state that fails its check (tests/server/operator/miss_reasons_test.cpp).
TEST(BankMissReason, AFullRestoreHasNoReason) {
  const auto schema = synthetic_schema();
  RamTier ram(1 << 24);
  Bank bank({&ram});
  const auto tokens = random_tokens(21, 10 * kB);
  publish_chain(bank, schema, tokens, {2, 5, 9});
  auto r = lookup_and_verify(bank, schema, tokens);
  ASSERT_EQ(r.plan.restore_point, 9 * kB);
  EXPECT_EQ(r.plan.miss_reason, MissReason::kNone);
  EXPECT_EQ(r.plan.diverged_at, -1);
  // A prompt of one block has nothing usable: nothing missed either.
  std::vector<int32_t> one(tokens.begin(), tokens.begin() + kB);
  EXPECT_EQ(lookup_and_verify(bank, schema, one).plan.miss_reason, MissReason::kNone);
}

TEST(BankMissReason, NothingStoredIsNoEntry) {
  const auto schema = synthetic_schema();
  RamTier ram(1 << 24);
  Bank bank({&ram});
  publish_chain(bank, schema, random_tokens(22, 4 * kB), {1, 2, 3, 4});
  auto r = lookup_and_verify(bank, schema, random_tokens(23, 4 * kB));
  EXPECT_EQ(r.plan.restore_point, 0);
  EXPECT_EQ(r.plan.miss_reason, MissReason::kNoEntry);
  // A stored chain that shares no token with the prompt is no evidence of a
  // divergence.
  auto stored = random_tokens(24, 4 * kB);
  auto other = stored;
  other[0] += 1;
  publish_chain(bank, schema, stored, {1, 2, 3, 4});
  EXPECT_EQ(lookup_and_verify(bank, schema, other).plan.miss_reason, MissReason::kNoEntry);
}

TEST(BankMissReason, APromptThatLeavesAStoredChainDivergedAtItsFirstOwnToken) {
  const auto schema = synthetic_schema();
  RamTier ram(1 << 24);
  Bank bank({&ram});
  const auto tokens = random_tokens(25, 6 * kB);
  publish_chain(bank, schema, tokens, {1, 2, 3, 4, 5, 6});
  const int64_t B = kB;
  for (int64_t at : {3 * B + 5, 3 * B, 4 * B - 1, int64_t{5}}) {
    auto prompt = tokens;
    prompt[at] += 1;
    prompt.push_back(7);
    auto r = lookup_and_verify(bank, schema, prompt);
    EXPECT_EQ(r.plan.restore_point, at / kB * kB) << at;
    EXPECT_EQ(r.plan.miss_reason, MissReason::kDiverged) << at;
    EXPECT_EQ(r.plan.diverged_at, at);
  }
}

TEST(BankMissReason, AHoleBeforeStoredBlocksIsAnEvictedMiddleBlock) {
  const auto schema = synthetic_schema();
  RamTier ram(1 << 24);
  Bank bank({&ram});
  const auto tokens = random_tokens(26, 8 * kB);
  publish_chain(bank, schema, tokens, {1, 2, 3, 4, 5, 6, 7});
  const auto keys = chain_keys(root_key(kBankFormatVersion, "fp", "", kB), tokens, kB, 7);
  ASSERT_TRUE(ram.erase(ObjectKind::kBlock, keys[4]));
  auto r = lookup_and_verify(bank, schema, tokens);
  EXPECT_EQ(r.plan.restore_point, 3 * kB);
  EXPECT_EQ(r.plan.miss_reason, MissReason::kEvicted);
  ASSERT_TRUE(ram.erase(ObjectKind::kBlock, keys[1]));  // the very first block: still a hole
  r = lookup_and_verify(bank, schema, tokens);
  EXPECT_EQ(r.plan.restore_point, 0);
  EXPECT_EQ(r.plan.miss_reason, MissReason::kEvicted);
}

TEST(BankMissReason, StoredBlocksWithoutASnapshotAmongThemAreSnapshotMissing) {
  const auto schema = synthetic_schema();
  RamTier ram(1 << 24);
  Bank bank({&ram});
  const auto tokens = random_tokens(27, 8 * kB);
  publish_chain(bank, schema, tokens, {2, 7});
  // Blocks 1..5 match; the snapshots sit at 2B and 7B.
  std::vector<int32_t> prompt(tokens.begin(), tokens.begin() + 5 * kB + 1);
  auto r = lookup_and_verify(bank, schema, prompt);
  EXPECT_EQ(r.plan.restore_point, 2 * kB);
  EXPECT_EQ(r.plan.matched_tokens, 5 * kB);
  EXPECT_EQ(r.plan.miss_reason, MissReason::kSnapshotMissing);
  prompt.resize(kB + 1);  // block 1 only, and no snapshot at B
  EXPECT_EQ(lookup_and_verify(bank, schema, prompt).plan.miss_reason, MissReason::kSnapshotMissing);
}

TEST(BankMissReason, ACopyThatFailsItsCheckIsCheckFailed) {
  const auto schema = synthetic_schema();
  CorruptingTier tier(TierKind::kRam);
  Bank bank({&tier});
  const auto tokens = random_tokens(28, 6 * kB);
  publish_chain(bank, schema, tokens, {1, 2, 3, 4, 5});
  const auto keys = chain_keys(root_key(kBankFormatVersion, "fp", "", kB), tokens, kB, 5);
  tier.corrupt(ObjectKind::kSnapshot, keys[5]);
  auto r = lookup_and_verify(bank, schema, tokens);
  EXPECT_EQ(r.plan.restore_point, 4 * kB);
  EXPECT_EQ(r.plan.miss_reason, MissReason::kCheckFailed);
  tier.corrupt(ObjectKind::kBlock, keys[2]);
  r = lookup_and_verify(bank, schema, tokens);
  EXPECT_EQ(r.plan.restore_point, kB);
  EXPECT_EQ(r.plan.miss_reason, MissReason::kCheckFailed);
  // A failed copy with a good one below is no miss.
  RamTier good(1 << 24);
  CorruptingTier bad(TierKind::kRam);
  Bank both({&bad, &good});
  publish_chain(both, schema, tokens, {1, 2, 3, 4, 5});
  bad.corrupt(ObjectKind::kBlock, keys[2]);
  r = lookup_and_verify(both, schema, tokens);
  EXPECT_EQ(r.plan.restore_point, 5 * kB);
  EXPECT_EQ(r.plan.check_failures, 1);
  EXPECT_EQ(r.plan.miss_reason, MissReason::kNone);
}

// The probe is apart from the plan (Bank::stored_in_other_namespace): the
// engine asks it after the client-visible timings are taken.
TEST(BankMissReason, TheSameTokensUnderAnotherNamespaceAreFlaggedForTheOperatorOnly) {
  const auto schema = synthetic_schema();
  RamTier ram(1 << 24);
  Bank bank({&ram});
  const auto tokens = random_tokens(29, 4 * kB);
  auto elsewhere = [&](const std::vector<int32_t>& prompt, const std::string& ns) {
    return bank.stored_in_other_namespace(root_key(kBankFormatVersion, "fp", ns, kB),
                                          std::span<const int32_t>(prompt).first(kB));
  };
  publish_chain(bank, schema, tokens, {1, 2, 3}, "tenant-a");
  // Tenant a has not looked anything up since start: its root is unknown.
  auto r = lookup_and_verify(bank, schema, tokens, "tenant-b");
  EXPECT_EQ(r.plan.miss_reason, MissReason::kNoEntry);
  EXPECT_FALSE(elsewhere(tokens, "tenant-b"));
  EXPECT_EQ(lookup_and_verify(bank, schema, tokens, "tenant-a").plan.restore_point, 3 * kB);
  r = lookup_and_verify(bank, schema, tokens, "tenant-b");
  EXPECT_EQ(r.plan.restore_point, 0);
  EXPECT_EQ(r.plan.miss_reason, MissReason::kNoEntry);  // what tenant b's own record says
  EXPECT_TRUE(elsewhere(tokens, "tenant-b"));
  EXPECT_FALSE(elsewhere(tokens, "tenant-a")) << "its own root is not another namespace";
  EXPECT_EQ(operator_miss_reason(r.plan.miss_reason, true), MissReason::kOtherNamespace);
  // Another prompt is stored nowhere.
  EXPECT_FALSE(elsewhere(random_tokens(30, 4 * kB), "tenant-b"));
  // Nothing else masks as other_namespace.
  EXPECT_EQ(operator_miss_reason(MissReason::kDiverged, true), MissReason::kDiverged);
  EXPECT_EQ(operator_miss_reason(MissReason::kReadOnly, true), MissReason::kOtherNamespace);
}

TEST(BankMissReason, NamesAreDistinctAndStable) {
  std::set<std::string> names;
  for (size_t i = 0; i < kMissReasons; ++i) EXPECT_TRUE(names.insert(miss_reason_name(static_cast<MissReason>(i))).second);
  EXPECT_EQ(names, (std::set<std::string>{"none", "no_entry", "diverged", "evicted", "snapshot_missing", "check_failed",
                                          "other_namespace", "read_only", "bypass", "echo"}));
}

}  // namespace
}  // namespace sb
