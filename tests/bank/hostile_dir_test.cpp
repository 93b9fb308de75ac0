// Issue 34, finding 9: the SSD bank's directory against other local users
// and against crafted contents.
//  - Private: every file the tier makes (objects, quarantined objects, the
//    lock) is 0600 and every directory 0700, whatever the umask (block files
//    hold tenants' token ids).
//  - Cycle-safe: parent links come from object headers; a crafted directory
//    whose headers form a parent cycle ends every walk of the operator's
//    view (prefixes, flush of a namespace, pinning a chain) with the cycle
//    named nobody's. Before, each walk went round forever, growing a vector
//    (here: out of a 2 GiB address space within seconds, not out of the
//    machine's memory; and a watchdog ends a walk that neither ends nor
//    grows).
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <future>

#include "bank/bank.h"
#include "bank/ssd_tier.h"
#include "tests/bank/ssd_test_util.h"
#include "tests/util/sanitizers.h"
#include "tests/util/temp_dir.h"

namespace sb {
namespace {

using namespace sb::testing;
namespace stdfs = std::filesystem;

TEST(HostileDir, EveryFileAndDirectoryTheTierMakesIsPrivate) {
  TempDir d;
  const mode_t old_umask = ::umask(0);  // the tier must ask for private modes itself
  {
    auto t = open_tier(test_options(d.bank() + "/deeper/bank"));
    const TestChain c = make_chain(1, 3);
    for (const auto& o : c.all()) ASSERT_TRUE(t->put(o, Retention::kBlock).is_ok());
    ASSERT_TRUE(t->flush().is_ok());
    EXPECT_TRUE(t->quarantine(ObjectKind::kBlock, c.blocks[1]->key, "test"));
    ASSERT_TRUE(t->close(std::chrono::steady_clock::time_point::max()).is_ok());
  }
  ::umask(old_umask);
  size_t files = 0, dirs = 0;
  bool saw_lock = false, saw_quarantined = false;
  auto check = [&](const stdfs::path& p) {
    struct stat st;
    ASSERT_EQ(::lstat(p.c_str(), &st), 0) << p;
    EXPECT_EQ(st.st_mode & 077, 0u) << p << " mode " << std::oct << (st.st_mode & 07777);
    if (S_ISDIR(st.st_mode)) ++dirs;
    if (S_ISREG(st.st_mode)) ++files;
    saw_lock = saw_lock || p.filename() == "LOCK";
    saw_quarantined = saw_quarantined || p.parent_path().filename() == "quarantine";
  };
  check(d.bank() + "/deeper");
  for (const auto& e : stdfs::recursive_directory_iterator(d.bank() + "/deeper")) check(e.path());
  EXPECT_GE(files, 7u);  // 6 objects (one quarantined) and the lock
  EXPECT_GE(dirs, 5u);   // bank, v2, objects, quarantine, fan-out
  EXPECT_TRUE(saw_lock);
  EXPECT_TRUE(saw_quarantined);
}

// Runs `f` on its own thread; a walk that never ends fails the test binary
// after `limit` instead of hanging it.
template <typename F>
void within(std::chrono::seconds limit, const char* what, F f) {
  auto done = std::async(std::launch::async, f);
  if (done.wait_for(limit) == std::future_status::timeout) {
    ADD_FAILURE() << what << " did not end within " << limit.count() << " s";
    std::fprintf(stderr, "%s did not end: a walk without cycle detection\n", what);
    std::_Exit(1);
  }
  done.get();
}

TEST(HostileDir, ParentLinksThatFormACycleEndEveryWalk) {
  TempDir d;
  // Blocks 1..4 of a chain, then block 2 rewritten to name block 3 as its
  // parent: 2 -> 3 -> 2 -> ..., with block 4 hanging off the cycle. Written
  // through the tier, so every file is well-formed (header, checksums).
  const TestChain c = make_chain(3, 4);
  auto crafted = std::make_shared<Object>(*c.blocks[1]);
  crafted->parent = c.blocks[2]->key;
  {
    auto t = open_tier(test_options(d.bank()));
    for (const auto& o : {c.blocks[0], ObjectRef(crafted), c.blocks[2], c.blocks[3]})
      ASSERT_TRUE(t->put(o, Retention::kBlock).is_ok());
    for (const auto& s : c.snapshots) ASSERT_TRUE(t->put(s, Retention::kKeep).is_ok());
    ASSERT_TRUE(t->close(std::chrono::steady_clock::time_point::max()).is_ok());
  }
  // A fresh process's view: the index is the headers on disk.
  auto t = open_tier(test_options(d.bank()));
  ASSERT_EQ(t->entries().size(), 8u);
  Bank bank({t.get()});
  const Key root = c.blocks[0]->parent;

#if !SB_UNDER_ASAN && !SB_UNDER_TSAN
  // A walk that grows without end runs out of this, not of the machine.
  struct rlimit old_limit;
  ASSERT_EQ(getrlimit(RLIMIT_AS, &old_limit), 0);
  struct rlimit tight = old_limit;
  tight.rlim_cur = std::min<rlim_t>(old_limit.rlim_max, rlim_t{2} << 30);
  ASSERT_EQ(setrlimit(RLIMIT_AS, &tight), 0);
#endif
  std::vector<PrefixInfo> listed;
  within(std::chrono::seconds(30), "prefixes()", [&] { listed = bank.prefixes(true, 8); });
  Pin pinned_tail, pinned_cycle;
  Status pin_tail, pin_cycle;
  within(std::chrono::seconds(30), "pin_chain()", [&] {
    pin_tail = bank.pin_chain(c.blocks[3]->key, 60000, &pinned_tail);
    pin_cycle = bank.pin_chain(c.blocks[1]->key, 60000, &pinned_cycle);
  });
  FlushResult flushed;
  Status flush;
  within(std::chrono::seconds(30), "flush(root)", [&] { flush = bank.flush(&root, &flushed); });
#if !SB_UNDER_ASAN && !SB_UNDER_TSAN
  ASSERT_EQ(setrlimit(RLIMIT_AS, &old_limit), 0);
#endif

  // Block 1 (now nobody's parent) is a prefix with its root; block 4 hangs
  // off the cycle: listed, with no root, each block counted once.
  const PrefixInfo *one = nullptr, *four = nullptr;
  for (const auto& p : listed) {
    if (p.tail == c.blocks[0]->key) one = &p;
    if (p.tail == c.blocks[3]->key) four = &p;
  }
  ASSERT_NE(one, nullptr);
  EXPECT_TRUE(one->has_root);
  EXPECT_EQ(one->root, root);
  ASSERT_NE(four, nullptr);
  EXPECT_FALSE(four->has_root);
  EXPECT_EQ(four->blocks, 3);  // 4, 3, 2; then 3 again: the walk stops
  EXPECT_EQ(four->restorable_tokens, 0);

  ASSERT_TRUE(pin_tail.is_ok()) << pin_tail.to_string();
  EXPECT_FALSE(pinned_tail.has_root);
  EXPECT_EQ(pinned_tail.keys.size(), 3u);
  ASSERT_TRUE(pin_cycle.is_ok()) << pin_cycle.to_string();
  EXPECT_FALSE(pinned_cycle.has_root);
  EXPECT_EQ(pinned_cycle.keys.size(), 2u);

  // The namespace's flush takes block 1 and its snapshot; the cycle and what
  // hangs off it are nobody's.
  ASSERT_TRUE(flush.is_ok()) << flush.to_string();
  EXPECT_EQ(flushed.objects, 2u);
  EXPECT_EQ(flushed.unattributed, 6u);
}

}  // namespace
}  // namespace sb
