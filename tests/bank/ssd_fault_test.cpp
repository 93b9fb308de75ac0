// I/O faults: an error at the n-th file-system operation for every n, an
// fsync that stays failed, a full disk. The tier reports errors, keeps
// serving what it has, never serves a wrong byte, and writes again once the
// fault is gone.
#include <gtest/gtest.h>

#include <filesystem>

#include "bank/ssd_tier.h"
#include "tests/bank/ssd_test_util.h"
#include "tests/util/fault_fs.h"

namespace sb {
namespace {

using namespace sb::testing;
namespace fsys = std::filesystem;

void expect_all_served(SsdTier& t, const std::vector<ObjectRef>& objs, const std::string& what) {
  for (const auto& o : objs) {
    ObjectRef got;
    Status s = t.get(o->kind, o->key, &got);
    ASSERT_TRUE(s.is_ok()) << what << ": " << s.to_string();
    EXPECT_TRUE(same_object(*o, *got)) << what;
  }
}

TEST(SsdFault, IoErrorAtEveryOperationInTurn) {
  const auto old_objs = make_chain(300, 1).all();
  const auto new_objs = make_chain(301, 2).all();
  std::vector<ObjectRef> all = old_objs;
  all.insert(all.end(), new_objs.begin(), new_objs.end());
  int hits = 0;
  for (uint64_t n = 1;; ++n) {
    ASSERT_LT(n, 1000u);
    TempDir d(/*in_memory=*/true);
    {
      auto t = open_tier(test_options(d.bank()));
      for (const auto& o : old_objs) ASSERT_TRUE(t->put(o, Retention::kBlock).is_ok());
      ASSERT_TRUE(t->flush().is_ok());
    }
    FaultFs fault;
    fault.fail_at(n);  // counts from the open on
    std::unique_ptr<SsdTier> t;
    Status opened = SsdTier::open(test_options(d.bank(), &fault), &t);
    std::vector<ObjectRef> published;
    if (!opened.is_ok()) {
      EXPECT_EQ(opened.code(), Code::kIoError) << "op " << n << ": " << opened.to_string();
    } else {
      for (const auto& o : new_objs) (void)t->put(o, Retention::kBlock);
      Status flushed = t->flush();
      for (const auto& o : all) {
        ObjectRef got;
        Status s = t->get(o->kind, o->key, &got);
        if (s.is_ok()) {
          EXPECT_TRUE(same_object(*o, *got)) << "op " << n;
        }
        // An injected error is an I/O error, never a check failure.
        EXPECT_NE(s.code(), Code::kCorruption) << "op " << n << ": " << s.to_string();
        if (t->contains(o->kind, o->key)) published.push_back(o);
      }
      EXPECT_EQ(t->stats().check_failures, 0u);
      if (!flushed.is_ok()) {
        EXPECT_GT(t->ssd_stats().write_errors, 0u);
      }
      t.reset();
    }
    const bool hit = fault.fail_hit();
    // After the fault: everything that was published or old is served, and
    // writing works again.
    auto clean = open_tier(test_options(d.bank()));
    expect_all_served(*clean, old_objs, "old objects after op " + std::to_string(n));
    expect_all_served(*clean, published, "published objects after op " + std::to_string(n));
    for (const auto& o : new_objs) ASSERT_TRUE(clean->put(o, Retention::kBlock).is_ok());
    ASSERT_TRUE(clean->flush().is_ok()) << "op " << n;
    expect_all_served(*clean, all, "all objects after op " + std::to_string(n));
    EXPECT_EQ(count_temporary_files(d.bank()), 0u);
    if (::testing::Test::HasFatalFailure()) return;
    if (!hit) break;
    ++hits;
  }
  EXPECT_GE(hits, 30);
}

TEST(SsdFault, FailedFsyncThatStaysFailedPublishesNothing) {
  TempDir d(/*in_memory=*/true);
  FaultFs fault;
  const auto old_objs = make_chain(310, 2).all();
  const auto new_objs = make_chain(311, 2).all();
  auto t = open_tier(test_options(d.bank(), &fault));
  for (const auto& o : old_objs) ASSERT_TRUE(t->put(o, Retention::kBlock).is_ok());
  ASSERT_TRUE(t->flush().is_ok());
  fault.set_sync_broken(true);
  for (int attempt = 0; attempt < 3; ++attempt) {
    for (const auto& o : new_objs) ASSERT_TRUE(t->put(o, Retention::kBlock).is_ok());
    EXPECT_EQ(t->flush().code(), Code::kIoError);
    for (const auto& o : new_objs) EXPECT_FALSE(t->contains(o->kind, o->key));
    expect_all_served(*t, old_objs, "old objects while fsync fails");
  }
  EXPECT_EQ(t->ssd_stats().write_errors, 3 * new_objs.size());
  EXPECT_EQ(count_temporary_files(d.bank()), 0u);
  for (const auto& o : new_objs) EXPECT_FALSE(fsys::exists(t->object_path(o->kind, o->key)));
  fault.set_sync_broken(false);
  for (const auto& o : new_objs) ASSERT_TRUE(t->put(o, Retention::kBlock).is_ok());
  ASSERT_TRUE(t->flush().is_ok());
  expect_all_served(*t, new_objs, "new objects once fsync works");
  t.reset();
  auto again = open_tier(test_options(d.bank()));
  expect_all_served(*again, old_objs, "after reopen");
  expect_all_served(*again, new_objs, "after reopen");
}

TEST(SsdFault, DiskFullReportsAndRecoversWhenSpaceReturns) {
  TempDir d(/*in_memory=*/true);
  FaultFs fault;
  const auto old_objs = make_chain(320, 2).all();
  const auto new_objs = make_chain(321, 2).all();
  auto t = open_tier(test_options(d.bank(), &fault));
  for (const auto& o : old_objs) ASSERT_TRUE(t->put(o, Retention::kBlock).is_ok());
  ASSERT_TRUE(t->flush().is_ok());
  fault.set_disk_full(true);
  for (const auto& o : new_objs) ASSERT_TRUE(t->put(o, Retention::kBlock).is_ok());
  EXPECT_EQ(t->flush().code(), Code::kResourceExhausted);
  for (const auto& o : new_objs) EXPECT_FALSE(t->contains(o->kind, o->key));
  expect_all_served(*t, old_objs, "old objects on a full disk");
  EXPECT_EQ(count_temporary_files(d.bank()), 0u);
  EXPECT_EQ(t->ssd_stats().write_errors, new_objs.size());
  fault.set_disk_full(false);
  for (const auto& o : new_objs) ASSERT_TRUE(t->put(o, Retention::kBlock).is_ok());
  ASSERT_TRUE(t->flush().is_ok());
  expect_all_served(*t, new_objs, "new objects once space returns");
}

}  // namespace
}  // namespace sb
