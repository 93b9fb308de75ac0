// server/transport/prepare_pool.h: a job runs on a pool thread below the
// caller's priority and returns with its exception; after shutdown a job is
// refused, never run; without threads a job runs on the caller.
#include "server/transport/prepare_pool.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <stdexcept>
#include <thread>
#include <vector>

#include "common/thread_priority.h"

namespace sb {
namespace {

TEST(PreparePool, RunsJobsOnLoweredThreadsAndRethrowsTheirErrors) {
  const int caller_nice = this_thread_nice();
  ASSERT_LE(caller_nice, 14);
  set_background_nice(5);
  PreparePool pool(2);
  set_background_nice(0);
  int job_nice = -100;
  pid_t job_tid = 0;
  EXPECT_TRUE(pool.run([&] {
    job_nice = this_thread_nice();
    job_tid = gettid();
  }));
  EXPECT_EQ(job_nice, caller_nice + 5);
  EXPECT_NE(job_tid, gettid());
  EXPECT_THROW(pool.run([] { throw std::invalid_argument("bad body"); }), std::invalid_argument);
  // Many callers at once: every job runs once.
  std::atomic<int> ran{0};
  std::vector<std::thread> callers;
  for (int i = 0; i < 8; ++i)
    callers.emplace_back([&] {
      for (int k = 0; k < 50; ++k) EXPECT_TRUE(pool.run([&] { ++ran; }));
    });
  for (auto& t : callers) t.join();
  EXPECT_EQ(ran.load(), 400);
  pool.shutdown();
  bool after = false;
  EXPECT_FALSE(pool.run([&] { after = true; }));
  EXPECT_FALSE(after);
}

TEST(PreparePool, WithoutThreadsRunsOnTheCaller) {
  PreparePool pool(0);
  pid_t tid = 0;
  EXPECT_TRUE(pool.run([&] { tid = gettid(); }));
  EXPECT_EQ(tid, gettid());
}

}  // namespace
}  // namespace sb
