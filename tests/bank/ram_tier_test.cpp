// RamTier: budget, first-wins puts, and the exact eviction order written in
// bank/ram_tier.h.
#include "bank/ram_tier.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "tests/bank/test_keys.h"

namespace sb {
namespace {

Key K(uint64_t n) { return testing::numbered_key(n, 0xabcd); }
const Key kRoot = K(0);

// A block of one token (4 bytes) plus `floats` floats.
ObjectRef block(const Key& key, const Key& parent, size_t floats = 0, float fill = 1.0f) {
  auto o = std::make_shared<Object>();
  o->kind = ObjectKind::kBlock;
  o->key = key;
  o->parent = parent;
  o->tokens = {static_cast<int32_t>(testing::key_number(key))};
  o->parts = {f32_part(std::vector<float>(floats, fill))};
  return o;
}
ObjectRef snapshot(const Key& key, size_t floats = 2) {
  auto o = std::make_shared<Object>();
  o->kind = ObjectKind::kSnapshot;
  o->key = key;
  o->parts = {f32_part(std::vector<float>(floats, 2.0f))};
  return o;
}

using Evicted = std::vector<std::pair<ObjectKind, Key>>;
std::pair<ObjectKind, Key> B(const Key& k) { return {ObjectKind::kBlock, k}; }
std::pair<ObjectKind, Key> S(const Key& k) { return {ObjectKind::kSnapshot, k}; }

std::string show(const Evicted& e) {
  std::string s;
  for (const auto& [kind, key] : e) {
    s += kind == ObjectKind::kBlock ? 'B' : 'S';
    s += std::to_string(testing::key_number(key));
    s += ' ';
  }
  return s;
}

TEST(RamTier, PutGetContainsAndFirstWins) {
  RamTier t(1000);
  auto first = block(K(1), kRoot, 3, 1.0f);
  auto second = block(K(1), kRoot, 3, 9.0f);
  ASSERT_TRUE(t.put(first, Retention::kBlock).is_ok());
  ASSERT_TRUE(t.put(second, Retention::kBlock).is_ok());
  EXPECT_TRUE(t.contains(ObjectKind::kBlock, K(1)));
  EXPECT_FALSE(t.contains(ObjectKind::kSnapshot, K(1)));
  ObjectRef got;
  ASSERT_TRUE(t.get(ObjectKind::kBlock, K(1), &got).is_ok());
  EXPECT_EQ(got.get(), first.get());  // shared, not copied; the first put wins
  EXPECT_EQ(t.stats().bytes, first->payload_bytes());
  EXPECT_EQ(t.stats().blocks, 1u);
  EXPECT_EQ(t.get(ObjectKind::kSnapshot, K(1), &got).code(), Code::kNotFound);
  EXPECT_EQ(t.stats().hits, 1u);
  EXPECT_EQ(t.stats().misses, 1u);
}

TEST(RamTier, ObjectLargerThanBudgetIsRefusedAndChangesNothing) {
  RamTier t(16);
  ASSERT_TRUE(t.put(block(K(1), kRoot), Retention::kBlock).is_ok());
  EXPECT_EQ(t.put(block(K(2), K(1), 10), Retention::kBlock).code(), Code::kResourceExhausted);
  EXPECT_TRUE(t.contains(ObjectKind::kBlock, K(1)));
  EXPECT_FALSE(t.contains(ObjectKind::kBlock, K(2)));
  EXPECT_TRUE(t.take_evicted().empty());
}

// Two chains under one root:
//   A: A1 - A2 - A3 - A4, an interval snapshot at A2, a prompt-end one at A4;
//   B: B1 - B2, a prompt-end snapshot at B1, a message snapshot at B2.
// Then a get of the snapshot at A2 makes it more recent than the one at B1.
void fill_two_chains(RamTier& t) {
  ASSERT_TRUE(t.put(block(K(1), kRoot), Retention::kBlock).is_ok());
  ASSERT_TRUE(t.put(block(K(2), K(1)), Retention::kBlock).is_ok());
  ASSERT_TRUE(t.put(snapshot(K(2)), Retention::kThinFirst).is_ok());
  ASSERT_TRUE(t.put(block(K(3), K(2)), Retention::kBlock).is_ok());
  ASSERT_TRUE(t.put(block(K(4), K(3)), Retention::kBlock).is_ok());
  ASSERT_TRUE(t.put(snapshot(K(4)), Retention::kKeep).is_ok());
  ASSERT_TRUE(t.put(block(K(11), kRoot), Retention::kBlock).is_ok());
  ASSERT_TRUE(t.put(snapshot(K(11)), Retention::kKeep).is_ok());
  ASSERT_TRUE(t.put(block(K(12), K(11)), Retention::kBlock).is_ok());
  ASSERT_TRUE(t.put(snapshot(K(12)), Retention::kAnchor).is_ok());
  ObjectRef got;
  ASSERT_TRUE(t.get(ObjectKind::kSnapshot, K(2), &got).is_ok());
}

TEST(RamTier, EvictionOrderThinsMiddleSnapshotsThenShortensChainsFromTheirTails) {
  RamTier t(1 << 20);
  fill_two_chains(t);
  t.set_budget(0);
  const Evicted want = {S(K(11)), S(K(2)),             // 1. continued snapshots, least recent first
                        B(K(4)),  S(K(4)),             // 2. tail unit of A with its prompt-end snapshot
                        B(K(3)),  B(K(2)),  B(K(1)),   // 2. A's tail, one leaf at a time
                        B(K(12)), S(K(12)),            // 3. tail unit with a message snapshot
                        B(K(11))};
  const Evicted got = t.take_evicted();
  EXPECT_EQ(got, want) << show(got);
  EXPECT_EQ(t.stats().bytes, 0u);
  EXPECT_EQ(t.stats().evictions, 10u);
}

TEST(RamTier, EvictionStopsAsSoonAsTheBudgetHolds) {
  RamTier t(1 << 20);
  fill_two_chains(t);
  const uint64_t full = t.stats().bytes;
  t.set_budget(full - 1);
  EXPECT_EQ(t.take_evicted(), (Evicted{S(K(11))}));
  t.set_budget(full - 17);  // two snapshots of 8 bytes are not enough: A's tail unit goes too
  EXPECT_EQ(t.take_evicted(), (Evicted{S(K(2)), B(K(4)), S(K(4))}));
  EXPECT_TRUE(t.contains(ObjectKind::kBlock, K(3)));
  EXPECT_TRUE(t.contains(ObjectKind::kSnapshot, K(12)));
}

TEST(RamTier, PutEvictsTheLeastRecentlyUsedTail) {
  // Three one-block chains, 4 bytes each; a budget of 12 bytes.
  RamTier t(12);
  ASSERT_TRUE(t.put(block(K(1), kRoot), Retention::kBlock).is_ok());
  ASSERT_TRUE(t.put(block(K(2), kRoot), Retention::kBlock).is_ok());
  ASSERT_TRUE(t.put(block(K(3), kRoot), Retention::kBlock).is_ok());
  ObjectRef got;
  ASSERT_TRUE(t.get(ObjectKind::kBlock, K(1), &got).is_ok());  // now K2 is the least recent
  ASSERT_TRUE(t.put(block(K(4), kRoot), Retention::kBlock).is_ok());
  EXPECT_EQ(t.take_evicted(), (Evicted{B(K(2))}));
  ASSERT_TRUE(t.put(block(K(5), kRoot), Retention::kBlock).is_ok());
  EXPECT_EQ(t.take_evicted(), (Evicted{B(K(3))}));
}

TEST(RamTier, AMiddleBlockIsNeverEvictedWhileItsChainGoesOn) {
  // A chain of 3 and a more recent lone block: the chain's tail (K3) goes,
  // not its older middle (K1).
  RamTier t(16);
  ASSERT_TRUE(t.put(block(K(1), kRoot), Retention::kBlock).is_ok());
  ASSERT_TRUE(t.put(block(K(2), K(1)), Retention::kBlock).is_ok());
  ASSERT_TRUE(t.put(block(K(3), K(2)), Retention::kBlock).is_ok());
  ASSERT_TRUE(t.put(block(K(9), kRoot), Retention::kBlock).is_ok());
  ASSERT_TRUE(t.put(block(K(10), K(9)), Retention::kBlock).is_ok());
  EXPECT_EQ(t.take_evicted(), (Evicted{B(K(3))}));
}

TEST(RamTier, RePutRaisesASnapshotsRoleAndAMessageSnapshotWaitsForItsBlock) {
  RamTier t(1 << 20);
  ASSERT_TRUE(t.put(block(K(1), kRoot), Retention::kBlock).is_ok());
  ASSERT_TRUE(t.put(snapshot(K(1)), Retention::kThinFirst).is_ok());
  ASSERT_TRUE(t.put(block(K(2), K(1)), Retention::kBlock).is_ok());
  ASSERT_TRUE(t.put(snapshot(K(1)), Retention::kAnchor).is_ok());  // raised, not replaced
  ASSERT_TRUE(t.put(snapshot(K(77)), Retention::kThinFirst).is_ok());  // a lone snapshot
  t.set_budget(0);
  // K1's snapshot is continued but a message snapshot: it stays until its
  // block has become a leaf, then leaves with it as a message unit.
  EXPECT_EQ(t.take_evicted(), (Evicted{B(K(2)), S(K(77)), B(K(1)), S(K(1))}));
}

TEST(RamTier, EraseMakesAHoleWithoutCountingAnEviction) {
  RamTier t(1 << 20);
  ASSERT_TRUE(t.put(block(K(1), kRoot), Retention::kBlock).is_ok());
  ASSERT_TRUE(t.put(block(K(2), K(1)), Retention::kBlock).is_ok());
  EXPECT_TRUE(t.erase(ObjectKind::kBlock, K(1)));
  EXPECT_FALSE(t.erase(ObjectKind::kBlock, K(1)));
  EXPECT_FALSE(t.contains(ObjectKind::kBlock, K(1)));
  EXPECT_TRUE(t.contains(ObjectKind::kBlock, K(2)));
  EXPECT_EQ(t.stats().evictions, 0u);
  t.set_budget(0);
  EXPECT_EQ(t.take_evicted(), (Evicted{B(K(2))}));
}

}  // namespace
}  // namespace sb
