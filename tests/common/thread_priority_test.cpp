// common/thread_priority.h: a lowered thread's nice value, the process's
// other threads untouched; the time threads sharing a core wait for it.
#include "common/thread_priority.h"

#include <gtest/gtest.h>
#include <sched.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <thread>
#include <vector>

namespace sb {
namespace {

TEST(ThreadPriority, LowersOnlyTheCallingThreadByTheSetAmount) {
  const int before = this_thread_nice();
  ASSERT_LE(before, 12) << "the test needs room to lower this thread by 7";
  EXPECT_TRUE(lower_this_thread(0));  // off
  EXPECT_EQ(this_thread_nice(), before);
  EXPECT_EQ(background_nice(), 0);  // until serve sets it
  set_background_nice(7);
  EXPECT_EQ(background_nice(), 7);
  set_background_nice(0);
  int lowered = -100, after_other = -100;
  std::thread([&] {
    EXPECT_TRUE(lower_this_thread(7));
    lowered = this_thread_nice();
  }).join();
  after_other = this_thread_nice();
  EXPECT_EQ(lowered, before + 7);
  EXPECT_EQ(after_other, before);  // the caller's thread kept its priority
  set_background_nice(40);
  EXPECT_EQ(background_nice(), 19);  // clamped to what nice allows
  set_background_nice(0);
}

// Two threads that only compute, on one core: the scheduler makes them take
// turns, so between them they wait for it (no bound on how long).
TEST(ThreadPriority, ThreadsSharingOneCoreWaitForIt) {
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(sched_getcpu(), &one);
  double waited[2] = {-1, -1};
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t)
    threads.emplace_back([&, t] {
      ASSERT_EQ(sched_setaffinity(0, sizeof one, &one), 0);
      const double before = this_thread_waited_ms();
      ASSERT_GE(before, 0) << "/proc/thread-self/schedstat unreadable";
      timespec cpu{};
      volatile double x = 0;
      do {  // 100 ms of this thread's own CPU time
        for (int i = 0; i < 100000; ++i) x = x + 1;
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu);
      } while (cpu.tv_sec == 0 && cpu.tv_nsec < 100000000);
      waited[t] = this_thread_waited_ms() - before;
    });
  for (auto& t : threads) t.join();
  EXPECT_GE(waited[0], 0);
  EXPECT_GE(waited[1], 0);
  EXPECT_GT(waited[0] + waited[1], 0);
}

}  // namespace
}  // namespace sb
