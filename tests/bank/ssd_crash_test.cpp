// Crashes: a kill at every operation of the write path in turn (simulated
// with FaultFs, losing or tearing what was not synced), and real SIGKILLs of
// a writing process. After each: the bank opens, serves no wrong byte, and
// holds everything that was acknowledged durable.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <random>
#include <set>
#include <thread>

#include "bank/ssd_tier.h"
#include "tests/bank/ssd_test_util.h"
#include "tests/util/fault_fs.h"

namespace sb {
namespace {

using namespace sb::testing;

// Opens the bank after a crash and checks the promise: every acknowledged
// object is served exactly, every present object verifies, nothing is left
// half-written.
void check_after_crash(const std::string& bank, const std::vector<ObjectRef>& candidates,
                       const std::vector<ObjectRef>& acknowledged, const std::string& what) {
  std::unique_ptr<SsdTier> t;
  Status s = SsdTier::open(test_options(bank), &t);
  ASSERT_TRUE(s.is_ok()) << what << ": " << s.to_string();
  for (const auto& o : acknowledged) {
    ObjectRef got;
    Status g = t->get(o->kind, o->key, &got);
    ASSERT_TRUE(g.is_ok()) << what << ": acknowledged " << kind_tag(o->kind) << " lost: " << g.to_string();
    EXPECT_TRUE(same_object(*o, *got)) << what;
  }
  for (const auto& o : candidates) {
    if (!t->contains(o->kind, o->key)) continue;
    ObjectRef got;
    Status g = t->get(o->kind, o->key, &got);
    ASSERT_TRUE(g.is_ok()) << what << ": present but unreadable: " << g.to_string();
    EXPECT_TRUE(same_object(*o, *got)) << what;
  }
  EXPECT_EQ(t->stats().check_failures, 0u) << what;
  EXPECT_EQ(t->list().size(), t->stats().blocks + t->stats().snapshots);
  EXPECT_EQ(count_temporary_files(bank), 0u) << what;
}

void kill_at_every_write_op(CrashMode mode) {
  const auto first = make_chain(100, 1).all();
  const auto second = make_chain(200, 2).all();
  std::vector<ObjectRef> candidates = first;
  candidates.insert(candidates.end(), second.begin(), second.end());
  int kills = 0;
  for (uint64_t n = 1;; ++n) {
    ASSERT_LT(n, 500u) << "the write path never ends";
    TempDir d(/*in_memory=*/true);
    FaultFs fault;
    auto t = open_tier(test_options(d.bank(), &fault));
    for (const auto& o : first) ASSERT_TRUE(t->put(o, Retention::kBlock).is_ok());
    ASSERT_TRUE(t->flush().is_ok());
    fault.kill_at(n);
    for (const auto& o : second) (void)t->put(o, Retention::kKeep);
    Status flushed = t->flush();
    const bool hit_in_writes = fault.killed();
    // Reads keep their promise while the process is dying.
    for (const auto& o : first) {
      ObjectRef got;
      if (t->get(o->kind, o->key, &got).is_ok()) {
        EXPECT_TRUE(same_object(*o, *got));
      }
    }
    std::vector<ObjectRef> acknowledged;
    for (const auto& o : candidates)
      if (t->contains(o->kind, o->key)) acknowledged.push_back(o);
    const bool hit = fault.killed();
    EXPECT_EQ(flushed.is_ok(), !hit_in_writes) << "kill at " << n;
    t.reset();
    fault.simulate_crash(mode, n);
    fault.clear_faults();
    check_after_crash(d.bank(), candidates, acknowledged, "kill at write op " + std::to_string(n));
    if (::testing::Test::HasFatalFailure()) return;
    if (!hit) {
      EXPECT_EQ(acknowledged.size(), candidates.size());
      break;
    }
    ++kills;
  }
  // Each object's write is at least create, append, sync, close, rename and
  // a directory sync.
  EXPECT_GE(kills, 6 * static_cast<int>(second.size()));
}

TEST(SsdCrash, KillAtEveryWriteOpLosingUnsyncedData) { kill_at_every_write_op(CrashMode::kLoseUnsynced); }
TEST(SsdCrash, KillAtEveryWriteOpWithTornWrites) { kill_at_every_write_op(CrashMode::kTornKeepNames); }

// A child process writes objects and reports each one once it is visible
// (durable); the parent kills it with SIGKILL at a random moment, reopens,
// and checks. The child never exits on its own.
TEST(SsdCrash, RealSigkillOfAWritingProcess) {
  TempDir d;
  std::mt19937 rng(1234);
  std::vector<ObjectRef> acknowledged;
  std::map<uint64_t, TestChain> chains;
  auto chain_of = [&](uint64_t seed) -> const TestChain& {
    auto it = chains.find(seed);
    if (it == chains.end()) it = chains.emplace(seed, make_chain(seed, 1)).first;
    return it->second;
  };
  const int kRounds = 12;
  int killed_mid_write = 0;
  for (int round = 0; round < kRounds; ++round) {
    int fds[2];
    ASSERT_EQ(pipe(fds), 0);
    const uint64_t base = 10000 + 1000 * static_cast<uint64_t>(round);
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      close(fds[0]);
      std::unique_ptr<SsdTier> t;
      if (!SsdTier::open(test_options(d.bank()), &t).is_ok()) _exit(3);
      for (uint64_t seed = base;; ++seed) {
        TestChain c = make_chain(seed, 1);
        for (const auto& o : c.all()) (void)t->put(o, Retention::kBlock);
        (void)t->flush();
        bool visible = true;
        for (const auto& o : c.all()) visible = visible && t->contains(o->kind, o->key);
        if (visible && write(fds[1], &seed, sizeof(seed)) != sizeof(seed)) _exit(4);
      }
    }
    close(fds[1]);
    std::this_thread::sleep_for(std::chrono::milliseconds(60 + rng() % 200));
    ASSERT_EQ(kill(pid, SIGKILL), 0);
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFSIGNALED(status)) << "the writer exited by itself with " << WEXITSTATUS(status);
    uint64_t seed, last = base;
    size_t reported = 0;
    while (read(fds[0], &seed, sizeof(seed)) == sizeof(seed)) {
      for (const auto& o : chain_of(seed).all()) acknowledged.push_back(o);
      last = seed;
      ++reported;
    }
    close(fds[0]);
    // The objects it may have been writing when it died.
    std::vector<ObjectRef> candidates;
    for (uint64_t s = base; s <= last + 1; ++s)
      for (const auto& o : chain_of(s).all()) candidates.push_back(o);
    check_after_crash(d.bank(), candidates, acknowledged, "SIGKILL round " + std::to_string(round));
    if (::testing::Test::HasFatalFailure()) return;
    if (reported > 0) ++killed_mid_write;
  }
  // The writer made progress before most kills (the sleeps are much longer
  // than one write).
  EXPECT_GE(killed_mid_write, kRounds / 2);
  EXPECT_FALSE(acknowledged.empty());
}

}  // namespace
}  // namespace sb
