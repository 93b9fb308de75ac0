// The SSD tier's space rules (docs/bank-format.md, "Space"): the default
// budget and free-space reserve come from the file system; victims are
// deleted only after their replacement is published, or first when the file
// system itself lacks the room; a failed or impossible write never costs a
// published object; quarantined files count in the budget, go first and age
// out. The small disk is FaultFs's capacity (tests/util/fault_fs.h).
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>

#include "bank/ssd_tier.h"
#include "tests/bank/ssd_test_util.h"
#include "tests/util/fault_fs.h"

namespace sb {
namespace {

using namespace sb::testing;
namespace fsys = std::filesystem;

// Blocks of distinct conversations: all the same size.
std::vector<ObjectRef> blocks(int n, uint64_t seed) {
  std::vector<ObjectRef> out;
  for (int i = 0; i < n; ++i) out.push_back(make_chain(seed + static_cast<uint64_t>(i), 1).blocks[0]);
  return out;
}

bool readable(SsdTier& t, const ObjectRef& o) {
  ObjectRef got;
  return t.get(o->kind, o->key, &got).is_ok() && same_object(*o, *got);
}

TEST(SsdSpace, DefaultBudgetIsHalfTheFileSystemAndTheReserveATenth) {
  TempDir d(/*in_memory=*/true);
  FaultFs fs;
  fs.set_capacity(1000000);
  auto t = open_tier(test_options(d.bank(), &fs));
  EXPECT_EQ(t->stats().budget_bytes, 500000u);
  EXPECT_EQ(t->ssd_stats().reserve_bytes, 100000u);
  t.reset();
  auto o = test_options(d.bank(), &fs);
  o.budget_bytes = 12345;  // an explicit budget wins; the reserve still holds
  t = open_tier(o);
  EXPECT_EQ(t->stats().budget_bytes, 12345u);
  EXPECT_EQ(t->ssd_stats().reserve_bytes, 100000u);
}

TEST(SsdSpace, AFailedWriteNeverCostsAPublishedObject) {
  TempDir d(/*in_memory=*/true);
  FaultFs fs;
  const auto objs = blocks(5, 100);
  auto o = test_options(d.bank(), &fs);
  o.budget_bytes = 4 * encoded_size(*objs[0]);  // room for four
  auto t = open_tier(o);
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(t->put(objs[i], Retention::kBlock).is_ok());
  ASSERT_TRUE(t->flush().is_ok());

  // The fifth needs a victim's room, and its write fails (ENOSPC): the
  // victim was chosen but stays published and readable.
  fs.set_disk_full(true);
  ASSERT_TRUE(t->put(objs[4], Retention::kBlock).is_ok());
  EXPECT_EQ(t->flush().code(), Code::kResourceExhausted);
  fs.set_disk_full(false);
  EXPECT_EQ(t->stats().evictions, 0u);
  EXPECT_EQ(t->ssd_stats().write_errors, 1u);
  EXPECT_FALSE(t->contains(ObjectKind::kBlock, objs[4]->key));
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(t->contains(ObjectKind::kBlock, objs[i]->key)) << i;

  // An I/O error in the middle of the write: the same.
  fs.fail_at(3);
  ASSERT_TRUE(t->put(objs[4], Retention::kBlock).is_ok());
  EXPECT_EQ(t->flush().code(), Code::kIoError);
  ASSERT_TRUE(fs.fail_hit());
  EXPECT_EQ(t->stats().evictions, 0u);
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(t->contains(ObjectKind::kBlock, objs[i]->key)) << i;

  // Once it is written, the least recently used one goes, after the write.
  fs.clear_faults();
  ASSERT_TRUE(t->put(objs[4], Retention::kBlock).is_ok());
  ASSERT_TRUE(t->flush().is_ok());
  EXPECT_EQ(t->stats().evictions, 1u);
  EXPECT_FALSE(t->contains(ObjectKind::kBlock, objs[0]->key));
  for (int i = 1; i < 5; ++i) EXPECT_TRUE(readable(*t, objs[i])) << i;
  EXPECT_LE(t->stats().bytes, o.budget_bytes);
}

TEST(SsdSpace, TheFreeSpaceReserveHoldsOnAFillingDisk) {
  TempDir d(/*in_memory=*/true);
  FaultFs fs;
  const auto objs = blocks(60, 200);
  const uint64_t size = encoded_size(*objs[0]);
  const uint64_t capacity = 20 * size;
  fs.set_capacity(capacity);
  auto o = test_options(d.bank(), &fs);
  o.budget_bytes = 1ull << 30;  // the budget never binds: the disk does
  auto t = open_tier(o);
  const uint64_t reserve = t->ssd_stats().reserve_bytes;
  ASSERT_EQ(reserve, capacity / 10);
  for (const auto& obj : objs) {
    ASSERT_TRUE(t->put(obj, Retention::kBlock).is_ok());
    ASSERT_TRUE(t->flush().is_ok());
    EXPECT_LE(fs.used_bytes() + reserve, capacity) << "the bank took the reserve";
  }
  const SsdStats s = t->ssd_stats();
  EXPECT_GT(s.tier.evictions, 0u);
  EXPECT_EQ(s.write_errors, 0u);
  EXPECT_EQ(s.skipped_no_space, 0u);
  EXPECT_TRUE(readable(*t, objs.back()));
  for (const auto& e : t->list()) {
    ObjectRef got;
    EXPECT_TRUE(t->get(e.kind, e.key, &got).is_ok()) << e.key.hex();
  }
}

TEST(SsdSpace, NothingIsEvictedForAWriteThatCannotFitAnyway) {
  TempDir d(/*in_memory=*/true);
  FaultFs fs;
  const auto objs = blocks(3, 300);
  const uint64_t size = encoded_size(*objs[0]);
  fs.set_capacity(100 * size);
  auto o = test_options(d.bank(), &fs);
  auto t = open_tier(o);
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(t->put(objs[i], Retention::kBlock).is_ok());
  ASSERT_TRUE(t->flush().is_ok());
  // Another program fills the disk: even an empty bank would leave less than
  // the reserve free, so evicting would only lose objects.
  ASSERT_TRUE(write_whole_file(&fs, d.path() + "/other", std::string(95 * size, 'x')).is_ok());
  ASSERT_TRUE(t->put(objs[2], Retention::kBlock).is_ok());
  EXPECT_EQ(t->flush().code(), Code::kResourceExhausted);
  const SsdStats s = t->ssd_stats();
  EXPECT_EQ(s.skipped_no_space, 1u);
  EXPECT_EQ(s.write_errors, 0u);
  EXPECT_EQ(s.tier.evictions, 0u);
  EXPECT_TRUE(readable(*t, objs[0]));
  EXPECT_TRUE(readable(*t, objs[1]));
  EXPECT_FALSE(t->contains(ObjectKind::kBlock, objs[2]->key));
}

TEST(SsdSpace, QuarantineCountsInTheBudgetGoesFirstAndAgesOut) {
  TempDir d(/*in_memory=*/true);
  const auto objs = blocks(6, 400);
  const uint64_t size = encoded_size(*objs[0]);
  auto o = test_options(d.bank());
  o.budget_bytes = 4 * size;
  {
    auto t = open_tier(o);
    for (int i = 0; i < 4; ++i) ASSERT_TRUE(t->put(objs[i], Retention::kBlock).is_ok());
    ASSERT_TRUE(t->flush().is_ok());
    ASSERT_TRUE(t->quarantine(ObjectKind::kBlock, objs[3]->key, "test"));
    EXPECT_FALSE(t->quarantine(ObjectKind::kBlock, objs[3]->key, "again")) << "counted once";
    SsdStats s = t->ssd_stats();
    EXPECT_EQ(s.tier.quarantined, 1u);
    EXPECT_EQ(s.quarantine_files, 1u);
    EXPECT_EQ(s.quarantine_bytes, size);
    EXPECT_EQ(count_files(t->quarantine_dir()), 1u);
    // 3 published + 1 quarantined + 1 new > 4: the quarantined file goes, no
    // published object does.
    ASSERT_TRUE(t->put(objs[4], Retention::kBlock).is_ok());
    ASSERT_TRUE(t->flush().is_ok());
    s = t->ssd_stats();
    EXPECT_EQ(s.quarantine_files, 0u);
    EXPECT_EQ(s.quarantine_aged_out, 1u);
    EXPECT_EQ(s.tier.evictions, 0u);
    EXPECT_EQ(count_files(t->quarantine_dir()), 0u);
    for (int i : {0, 1, 2, 4}) EXPECT_TRUE(readable(*t, objs[i])) << i;
    // A fresh copy of the quarantined object may be stored again.
    ASSERT_TRUE(t->put(objs[3], Retention::kBlock).is_ok());
    ASSERT_TRUE(t->flush().is_ok());
    EXPECT_TRUE(readable(*t, objs[3]));
    ASSERT_TRUE(t->quarantine(ObjectKind::kBlock, objs[3]->key, "test"));
  }
  // Kept across a restart while young; deleted at open once past its age.
  {
    auto t = open_tier(o);
    EXPECT_EQ(t->ssd_stats().quarantine_files, 1u);
  }
  o.quarantine_max_age = std::chrono::seconds(0);
  auto t = open_tier(o);
  EXPECT_EQ(t->ssd_stats().quarantine_files, 0u);
  EXPECT_EQ(count_files(t->quarantine_dir()), 0u);
  EXPECT_FALSE(t->contains(ObjectKind::kBlock, objs[3]->key));
}

}  // namespace
}  // namespace sb
