// The SSD tier's eviction order, asserted exactly (bank/ssd_index.h).
#include "bank/ssd_index.h"

#include <gtest/gtest.h>

#include "tests/bank/test_keys.h"

namespace sb {
namespace {

SsdEntry entry(ObjectKind kind, uint64_t k, uint64_t bytes, Retention retention = Retention::kBlock) {
  SsdEntry e;
  e.kind = kind;
  e.key = testing::numbered_key(k);
  e.bytes = bytes;
  e.retention = retention;
  return e;
}

std::vector<uint64_t> order(const SsdIndex& index) {
  std::vector<uint64_t> v;
  for (const auto& e : index.in_eviction_order()) v.push_back(testing::key_number(e.key) * 10 + static_cast<uint64_t>(e.kind));
  return v;
}

TEST(SsdIndex, EvictsLeastRecentlyAccessedFirst) {
  SsdIndex index;
  index.insert(entry(ObjectKind::kBlock, 1, 10));
  index.insert(entry(ObjectKind::kBlock, 2, 20));
  index.insert(entry(ObjectKind::kSnapshot, 3, 30, Retention::kAnchor));
  EXPECT_EQ(order(index), (std::vector<uint64_t>{11, 21, 32}));
  EXPECT_TRUE(index.touch(ObjectKind::kBlock, testing::numbered_key(1)));
  EXPECT_EQ(order(index), (std::vector<uint64_t>{21, 32, 11}));
  EXPECT_EQ(testing::key_number(index.oldest()->key), 2u);
  EXPECT_EQ(index.bytes(), 60u);
  EXPECT_EQ(index.blocks(), 2u);
  EXPECT_EQ(index.snapshots(), 1u);
  EXPECT_TRUE(index.erase(ObjectKind::kBlock, testing::numbered_key(2)));
  EXPECT_FALSE(index.erase(ObjectKind::kBlock, testing::numbered_key(2)));
  EXPECT_FALSE(index.touch(ObjectKind::kBlock, testing::numbered_key(2)));
  EXPECT_EQ(order(index), (std::vector<uint64_t>{32, 11}));
  EXPECT_EQ(index.bytes(), 40u);
  EXPECT_EQ(index.blocks(), 1u);
}

TEST(SsdIndex, SameKeyOfTheOtherKindIsAnotherObject) {
  SsdIndex index;
  EXPECT_TRUE(index.insert(entry(ObjectKind::kBlock, 5, 1)));
  EXPECT_TRUE(index.insert(entry(ObjectKind::kSnapshot, 5, 2)));
  EXPECT_FALSE(index.insert(entry(ObjectKind::kBlock, 5, 3)));
  EXPECT_EQ(index.find(ObjectKind::kBlock, testing::numbered_key(5))->bytes, 1u);
  EXPECT_EQ(index.find(ObjectKind::kSnapshot, testing::numbered_key(5))->bytes, 2u);
  EXPECT_EQ(index.find(ObjectKind::kSnapshot, testing::numbered_key(6)), nullptr);
}

TEST(SsdIndex, LoadedEntriesOrderByAgeThenRoleThenKindThenKey) {
  SsdIndex index;
  index.load({
      {300, entry(ObjectKind::kBlock, 1, 1)},
      {100, entry(ObjectKind::kSnapshot, 2, 1, Retention::kAnchor)},
      {100, entry(ObjectKind::kSnapshot, 3, 1, Retention::kThinFirst)},
      {100, entry(ObjectKind::kBlock, 9, 1)},
      {100, entry(ObjectKind::kBlock, 4, 1)},
      {100, entry(ObjectKind::kSnapshot, 4, 1)},
      {200, entry(ObjectKind::kSnapshot, 5, 1, Retention::kKeep)},
  });
  // age 100: retention 0 (block 4, block 9, then snapshot 4 with retention 0), retention 1
  // (snapshot 3), retention 3 (snapshot 2); then age 200, then age 300.
  EXPECT_EQ(order(index), (std::vector<uint64_t>{41, 91, 42, 32, 22, 52, 11}));
  // Anything inserted after loading is newer than everything loaded.
  index.insert(entry(ObjectKind::kBlock, 7, 1));
  index.touch(ObjectKind::kBlock, testing::numbered_key(4));
  EXPECT_EQ(order(index), (std::vector<uint64_t>{91, 42, 32, 22, 52, 11, 71, 41}));
}

}  // namespace
}  // namespace sb
