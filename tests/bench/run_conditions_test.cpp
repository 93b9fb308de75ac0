// bench/run_conditions.h: the anonymous memory and its huge pages as
// /proc/self/smaps_rollup counts them; the runnable wait of the process's
// threads; the shares computed from two readings.
#include "bench/run_conditions.h"

#include <gtest/gtest.h>
#include <sched.h>
#include <sys/mman.h>
#include <time.h>

#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

namespace sb::bench {
namespace {

TEST(RunConditions, AnonymousMemoryGrowsByWhatIsTouched) {
  constexpr size_t kBytes = size_t(64) << 20;
  const HugePageCoverage before = huge_page_coverage();
  ASSERT_GT(before.anon_bytes, 0u) << "/proc/self/smaps_rollup unreadable";
  void* p = mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(p, MAP_FAILED);
  std::memset(p, 1, kBytes);
  const HugePageCoverage after = huge_page_coverage();
  munmap(p, kBytes);
  EXPECT_GE(after.anon_bytes, before.anon_bytes + kBytes);
  EXPECT_LE(after.anon_huge_bytes, after.anon_bytes);
  EXPECT_GE(after.share(), 0.0);
  EXPECT_LE(after.share(), 1.0);
}

// 100 ms of the calling thread's own CPU time.
void compute_100ms() {
  timespec cpu{};
  volatile double x = 0;
  do {
    for (int i = 0; i < 100000; ++i) x = x + 1;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu);
  } while (cpu.tv_sec == 0 && cpu.tv_nsec < 100000000);
}

// Two threads that only compute, on one core, read while both still live:
// they take turns, so the process's runnable wait grows (by how much is the
// scheduler's business).
TEST(RunConditions, ThreadsSharingOneCoreAddRunnableWait) {
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(sched_getcpu(), &one);
  std::atomic<int> started{0}, computed{0};
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t)
    threads.emplace_back([&] {
      sched_setaffinity(0, sizeof one, &one);
      ++started;
      while (started.load() < 2) std::this_thread::yield();
      compute_100ms();
      ++computed;
      while (!stop.load()) std::this_thread::yield();  // alive until the second reading
    });
  while (started.load() < 2) std::this_thread::yield();
  const WaitClocks before = wait_clocks();
  while (computed.load() < 2) std::this_thread::yield();
  const WaitClocks after = wait_clocks();
  stop = true;
  for (auto& t : threads) t.join();
  EXPECT_GT(after.runnable_wait, before.runnable_wait);
  EXPECT_GE(after.steal, before.steal);
}

TEST(RunConditions, SharesAreTheClocksOverWallTimeThreadsAndCpus) {
  const WaitClocks before{1.0, 2.0}, after{2.0, 2.0 + 0.5 * std::max(1u, std::thread::hardware_concurrency())};
  const WaitShares s = wait_shares(before, after, 2.0, 2);
  EXPECT_DOUBLE_EQ(s.runnable_wait, 0.25);  // 1 s of wait over 2 threads' 2 s
  EXPECT_DOUBLE_EQ(s.steal, 0.25);          // 0.5 s per CPU over 2 s
  EXPECT_EQ(wait_shares(before, after, 0.0, 2).runnable_wait, 0.0);
}

}  // namespace
}  // namespace sb::bench
