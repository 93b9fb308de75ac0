// The SSD tier's behaviour on a healthy disk: publish after durability,
// round trips across reopen, dedup, the lock, read-only mode, budgets and
// the exact eviction order, batch reads, and recovery of leftovers at open.
#include "bank/ssd_tier.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "tests/bank/ssd_test_util.h"
#include "tests/util/fault_fs.h"

namespace sb {
namespace {

using namespace sb::testing;
namespace fsys = std::filesystem;

void put_all(SsdTier& t, const std::vector<ObjectRef>& objs) {
  for (const auto& o : objs) ASSERT_TRUE(t.put(o, Retention::kBlock).is_ok());
  ASSERT_TRUE(t.flush().is_ok());
}

void expect_served(SsdTier& t, const std::vector<ObjectRef>& objs) {
  for (const auto& o : objs) {
    ObjectRef got;
    Status s = t.get(o->kind, o->key, &got);
    ASSERT_TRUE(s.is_ok()) << s.to_string();
    EXPECT_TRUE(same_object(*o, *got));
  }
}

TEST(SsdTier, PublishesAfterFlushAndServesAcrossReopen) {
  TempDir d;
  auto chain = make_chain(1, 4);
  {
    auto t = open_tier(test_options(d.bank()));
    for (const auto& o : chain.all()) EXPECT_FALSE(t->contains(o->kind, o->key));
    put_all(*t, chain.all());
    for (const auto& o : chain.all()) EXPECT_TRUE(t->contains(o->kind, o->key));
    expect_served(*t, chain.all());
    TierStats s = t->stats();
    EXPECT_EQ(s.blocks, 4u);
    EXPECT_EQ(s.snapshots, 4u);
    EXPECT_EQ(s.hits, 8u);
    uint64_t bytes = 0;
    for (const auto& o : chain.all()) bytes += encoded_size(*o);
    EXPECT_EQ(s.bytes, bytes);
    EXPECT_EQ(s.bytes_written, bytes);
    EXPECT_EQ(s.bytes_read, bytes);
  }
  auto t = open_tier(test_options(d.bank()));
  EXPECT_EQ(t->stats().blocks, 4u);
  expect_served(*t, chain.all());
  // A block and the snapshot that share a key are two files.
  EXPECT_TRUE(fsys::exists(t->object_path(ObjectKind::kBlock, chain.blocks[0]->key)));
  EXPECT_TRUE(fsys::exists(t->object_path(ObjectKind::kSnapshot, chain.blocks[0]->key)));
}

TEST(SsdTier, MissIsNotFoundAndCounted) {
  TempDir d;
  auto t = open_tier(test_options(d.bank()));
  ObjectRef got;
  EXPECT_EQ(t->get(ObjectKind::kBlock, testing::numbered_key(2, 1), &got).code(), Code::kNotFound);
  EXPECT_EQ(t->stats().misses, 1u);
  EXPECT_EQ(t->stats().check_failures, 0u);
}

TEST(SsdTier, WritingAPresentNameAgainIsANoOp) {
  TempDir d;
  auto chain = make_chain(2, 2);
  auto t = open_tier(test_options(d.bank()));
  put_all(*t, chain.all());
  const uint64_t written = t->stats().bytes_written;
  put_all(*t, chain.all());
  EXPECT_EQ(t->stats().bytes_written, written);
  // Two conversations with the same prefix share its files.
  auto again = make_chain(2, 3);
  put_all(*t, again.all());
  EXPECT_EQ(t->stats().blocks, 3u);
  EXPECT_EQ(t->stats().bytes_written, written + encoded_size(*again.blocks[2]) + encoded_size(*again.snapshots[2]));
}

TEST(SsdTier, SecondWriterIsRefusedWithAClearMessage) {
  TempDir d;
  auto t = open_tier(test_options(d.bank()));
  std::unique_ptr<SsdTier> second;
  Status s = SsdTier::open(test_options(d.bank()), &second);
  EXPECT_EQ(s.code(), Code::kIoError);
  EXPECT_NE(s.message().find("in use by another statebank process"), std::string::npos) << s.message();
  auto ro = test_options(d.bank());
  ro.mode = SsdMode::kReadOnly;
  EXPECT_FALSE(SsdTier::open(ro, &second).is_ok());
  t.reset();
  EXPECT_TRUE(SsdTier::open(test_options(d.bank()), &second).is_ok());
}

TEST(SsdTier, ReadOnlyServesAndStoresNothing) {
  TempDir d;
  auto chain = make_chain(3, 2);
  {
    auto t = open_tier(test_options(d.bank()));
    put_all(*t, {chain.blocks[0]});
  }
  auto ro = test_options(d.bank());
  ro.mode = SsdMode::kReadOnly;
  auto t = open_tier(ro);
  auto t2 = open_tier(ro);  // readers share the lock
  expect_served(*t, {chain.blocks[0]});
  EXPECT_TRUE(t->put(chain.blocks[1], Retention::kBlock).is_ok());
  EXPECT_TRUE(t->flush().is_ok());
  EXPECT_FALSE(t->contains(ObjectKind::kBlock, chain.blocks[1]->key));
  EXPECT_FALSE(fsys::exists(t->object_path(ObjectKind::kBlock, chain.blocks[1]->key)));
  std::unique_ptr<SsdTier> w;
  EXPECT_FALSE(SsdTier::open(test_options(d.bank()), &w).is_ok());
}

TEST(SsdTier, ReadOnlyOnAMissingDirectoryIsNotFound) {
  TempDir d;
  auto ro = test_options(d.bank());
  ro.mode = SsdMode::kReadOnly;
  std::unique_ptr<SsdTier> t;
  EXPECT_EQ(SsdTier::open(ro, &t).code(), Code::kNotFound);
  EXPECT_FALSE(fsys::exists(d.bank()));
}

TEST(SsdTier, OffTouchesNothing) {
  TempDir d;
  auto o = test_options(d.bank());
  o.mode = SsdMode::kOff;
  auto t = open_tier(o);
  auto chain = make_chain(4, 1);
  EXPECT_TRUE(t->put(chain.blocks[0], Retention::kBlock).is_ok());
  EXPECT_FALSE(t->contains(ObjectKind::kBlock, chain.blocks[0]->key));
  EXPECT_FALSE(fsys::exists(d.bank()));
}

TEST(SsdTier, BudgetEvictsLeastRecentlyAccessedInExactOrder) {
  TempDir d;
  auto chain = make_chain(5, 4);
  const uint64_t b = encoded_size(*chain.blocks[0]);
  auto o = test_options(d.bank());
  o.budget_bytes = 3 * b;  // blocks of one schema all have the same size
  auto t = open_tier(o);
  put_all(*t, {chain.blocks[0], chain.blocks[1], chain.blocks[2]});
  ObjectRef got;
  ASSERT_TRUE(t->get(ObjectKind::kBlock, chain.blocks[0]->key, &got).is_ok());  // 0 is now the newest
  put_all(*t, {chain.blocks[3]});
  EXPECT_TRUE(t->contains(ObjectKind::kBlock, chain.blocks[0]->key));
  EXPECT_FALSE(t->contains(ObjectKind::kBlock, chain.blocks[1]->key));
  EXPECT_FALSE(fsys::exists(t->object_path(ObjectKind::kBlock, chain.blocks[1]->key)));
  auto order = t->list();
  ASSERT_EQ(order.size(), 3u);
  EXPECT_EQ(order[0].key, chain.blocks[2]->key);
  EXPECT_EQ(order[1].key, chain.blocks[0]->key);
  EXPECT_EQ(order[2].key, chain.blocks[3]->key);
  EXPECT_EQ(t->stats().evictions, 1u);
  EXPECT_LE(t->stats().bytes, o.budget_bytes);
  // After a restart the order comes from the files' modification times
  // (set here far apart: the file system's clock is coarse), and a read
  // refreshes the time.
  auto set_age = [&](const ObjectRef& b, int seconds_ago) {
    fsys::last_write_time(t->object_path(ObjectKind::kBlock, b->key),
                          fsys::file_time_type::clock::now() - std::chrono::seconds(seconds_ago));
  };
  set_age(chain.blocks[0], 3000);
  set_age(chain.blocks[2], 2000);
  set_age(chain.blocks[3], 1000);
  const std::string path0 = t->object_path(ObjectKind::kBlock, chain.blocks[0]->key);
  const auto before = fsys::last_write_time(path0);
  t.reset();
  auto keys_of = [](const std::vector<SsdEntry>& v) {
    std::vector<Key> k;
    for (const auto& e : v) k.push_back(e.key);
    return k;
  };
  t = open_tier(o);
  EXPECT_EQ(keys_of(t->list()), (std::vector<Key>{chain.blocks[0]->key, chain.blocks[2]->key, chain.blocks[3]->key}));
  ASSERT_TRUE(t->get(ObjectKind::kBlock, chain.blocks[0]->key, &got).is_ok());
  EXPECT_GT(fsys::last_write_time(path0), before);
  t.reset();
  t = open_tier(o);
  EXPECT_EQ(keys_of(t->list()), (std::vector<Key>{chain.blocks[2]->key, chain.blocks[3]->key, chain.blocks[0]->key}));
  // gc with a smaller budget removes from the front of the order.
  uint64_t n = 0, bytes = 0;
  ASSERT_TRUE(t->evict_to(b, &n, &bytes).is_ok());
  EXPECT_EQ(n, 2u);
  EXPECT_EQ(bytes, 2 * b);
  EXPECT_TRUE(t->contains(ObjectKind::kBlock, chain.blocks[0]->key));
  EXPECT_FALSE(t->contains(ObjectKind::kBlock, chain.blocks[2]->key));
  EXPECT_FALSE(t->contains(ObjectKind::kBlock, chain.blocks[3]->key));
}

TEST(SsdTier, ObjectLargerThanTheBudgetIsRefused) {
  TempDir d;
  auto chain = make_chain(6, 1);
  auto o = test_options(d.bank());
  o.budget_bytes = 100;
  auto t = open_tier(o);
  ASSERT_TRUE(t->put(chain.blocks[0], Retention::kBlock).is_ok());
  EXPECT_EQ(t->flush().code(), Code::kResourceExhausted);
  EXPECT_FALSE(t->contains(ObjectKind::kBlock, chain.blocks[0]->key));
  EXPECT_EQ(t->ssd_stats().write_errors, 1u);
}

TEST(SsdTier, GetManyReadsEveryRequestAndReportsEachStatus) {
  TempDir d;
  auto chain = make_chain(7, 12);
  auto t = open_tier(test_options(d.bank()));
  put_all(*t, chain.all());
  std::vector<TierRead> reads;
  for (const auto& o : chain.all()) reads.push_back(TierRead{o->kind, o->key, nullptr, Status()});
  reads.push_back(TierRead{ObjectKind::kBlock, testing::numbered_key(9, 9), nullptr, Status()});
  t->get_many(reads);
  auto all = chain.all();
  for (size_t i = 0; i < all.size(); ++i) {
    ASSERT_TRUE(reads[i].status.is_ok()) << reads[i].status.to_string();
    EXPECT_TRUE(same_object(*all[i], *reads[i].object));
  }
  EXPECT_EQ(reads.back().status.code(), Code::kNotFound);
  EXPECT_EQ(reads.back().object, nullptr);
}

TEST(SsdTier, FullQueueDropsInsteadOfBlocking) {
  TempDir d;
  FaultFs fault;
  auto o = test_options(d.bank(), &fault);
  o.queue_max_objects = 1;
  o.put_max_wait = std::chrono::milliseconds(0);
  fault.set_sync_delay_ms(20);
  auto t = open_tier(o);
  auto chain = make_chain(8, 30);
  // Each write takes at least 20 ms; with room for one object in the queue,
  // 30 puts issued at once cannot all be kept.
  int dropped = 0;
  for (const auto& b : chain.blocks) {
    Status s = t->put(b, Retention::kBlock);
    if (!s.is_ok()) {
      EXPECT_EQ(s.code(), Code::kResourceExhausted);
      ++dropped;
    }
  }
  EXPECT_GT(dropped, 0);
  EXPECT_TRUE(t->flush().is_ok());
  EXPECT_EQ(t->ssd_stats().dropped_puts, static_cast<uint64_t>(dropped));
  EXPECT_EQ(t->stats().blocks + static_cast<uint64_t>(dropped), 30u);
}

TEST(SsdTier, CloseAtAPassedDeadlineDropsTheQueueStopsWritingAndLosesNothingStored) {
  TempDir d;
  FaultFs fault;
  auto o = test_options(d.bank(), &fault);
  fault.set_sync_delay_ms(100);
  auto chain = make_chain(9, 6);
  uint64_t stored = 0;
  {
    auto t = open_tier(o);
    for (const auto& b : chain.blocks) ASSERT_TRUE(t->put(b, Retention::kBlock).is_ok());
    // The writer spends at least 100 ms on its first file: a deadline that
    // has passed already cannot see six on disk.
    Status s = t->close(std::chrono::steady_clock::now());
    EXPECT_EQ(s.code(), Code::kResourceExhausted) << s.to_string();
    const SsdStats st = t->ssd_stats();
    stored = st.tier.blocks;
    EXPECT_EQ(st.queued, 0u);  // the writers are joined: nothing in flight either
    EXPECT_EQ(stored + st.dropped_puts, 6u);
    EXPECT_GE(st.dropped_puts, 1u);
    // Closed: later puts are refused and counted, reads still work.
    EXPECT_EQ(t->put(chain.snapshots[0], Retention::kThinFirst).code(), Code::kResourceExhausted);
    EXPECT_EQ(t->ssd_stats().dropped_puts, st.dropped_puts + 1);
    EXPECT_TRUE(t->flush().is_ok());
    EXPECT_TRUE(t->close(std::chrono::steady_clock::now()).is_ok());  // idempotent
  }
  // What was published before the close is whole; nothing else is there.
  fault.set_sync_delay_ms(0);
  auto t = open_tier(o);
  EXPECT_EQ(t->stats().blocks, stored);
  EXPECT_EQ(t->ssd_stats().temp_removed, 0u);
  for (const auto& b : chain.blocks)
    if (t->contains(b->kind, b->key)) expect_served(*t, {b});
}

TEST(SsdTier, OpenRemovesTemporariesAndLeavesForeignAndNewerFilesAlone) {
  TempDir d;
  auto chain = make_chain(9, 2);
  std::string blk0, blk1;
  {
    auto t = open_tier(test_options(d.bank()));
    put_all(*t, chain.all());
    blk0 = t->object_path(ObjectKind::kBlock, chain.blocks[0]->key);
    blk1 = t->object_path(ObjectKind::kBlock, chain.blocks[1]->key);
  }
  const std::string tmp = blk0 + ".tmp-999-1";
  fsys::copy_file(blk0, tmp);
  const std::string foreign = fsys::path(blk0).parent_path().string() + "/notes.txt";
  std::ofstream(foreign) << "mine";
  const std::string foreign_dir = d.bank() + "/v2/objects/mine";
  fsys::create_directory(foreign_dir);
  // A file from a future writer: version 3 in the header.
  {
    std::fstream f(blk1, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(8);
    const char v3[4] = {3, 0, 0, 0};
    f.write(v3, 4);
  }
  std::vector<std::string> lines;
  auto o = test_options(d.bank());
  o.log = [&](const std::string& m) { lines.push_back(m); };
  auto t = open_tier(o);
  EXPECT_FALSE(fsys::exists(tmp));
  EXPECT_TRUE(fsys::exists(foreign));
  EXPECT_TRUE(fsys::exists(foreign_dir));
  EXPECT_TRUE(fsys::exists(blk1));
  auto s = t->ssd_stats();
  EXPECT_EQ(s.temp_removed, 1u);
  EXPECT_EQ(s.ignored_files, 3u);
  EXPECT_EQ(s.tier.quarantined, 0u);
  EXPECT_FALSE(t->contains(ObjectKind::kBlock, chain.blocks[1]->key));
  expect_served(*t, {chain.blocks[0], chain.snapshots[0], chain.snapshots[1]});
  bool newer_logged = false;
  for (const auto& l : lines) newer_logged |= l.find("newer than this reader") != std::string::npos;
  EXPECT_TRUE(newer_logged);
  // gc-style cleanup never removes what the bank did not write.
  uint64_t files = 0, bytes = 0;
  EXPECT_TRUE(t->clear_quarantine(&files, &bytes).is_ok());
  EXPECT_TRUE(fsys::exists(foreign));
}

TEST(SsdTier, WrongSchemaOrWrongKeyIsACheckFailure) {
  TempDir d;
  auto chain = make_chain(10, 1);
  {
    auto o = test_options(d.bank());
    o.schema.reset();  // written without a schema digest
    auto t = open_tier(o);
    put_all(*t, chain.all());
  }
  auto t = open_tier(test_options(d.bank()));
  ObjectRef got;
  EXPECT_EQ(t->get(ObjectKind::kBlock, chain.blocks[0]->key, &got).code(), Code::kCorruption);
  EXPECT_EQ(t->stats().check_failures, 1u);
  EXPECT_EQ(t->ssd_stats().tier.quarantined, 1u);
  EXPECT_FALSE(t->contains(ObjectKind::kBlock, chain.blocks[0]->key));
  t.reset();

  // A block whose tokens do not hash to its name (a writer bug, or a file
  // copied under another name with its header rewritten) is refused.
  TempDir d2;
  auto forged = std::make_shared<Object>(*chain.blocks[0]);
  forged->tokens[3] += 1;
  {
    auto t2 = open_tier(test_options(d2.bank()));
    put_all(*t2, {forged});
    EXPECT_EQ(t2->get(ObjectKind::kBlock, forged->key, &got).code(), Code::kCorruption);
  }
}

}  // namespace
}  // namespace sb
