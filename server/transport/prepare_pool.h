// PreparePool: threads that do a request's work before its admission (the
// body parsed, validated, rendered, tokenized) below the request threads'
// priority (common/thread_priority.h), so that costly bodies take the CPU
// the step thread and the delivery of admitted requests' tokens leave.
// Contract:
//  - run(job) runs job on a pool thread and returns once it ran, with its
//    exception rethrown on the caller; jobs start in the order they came;
//  - with no threads (background_nice() 0 when constructed) run() runs the
//    job on the caller, as if there were no pool;
//  - after shutdown() (idempotent) run() runs nothing and returns false; a
//    job already started finishes first.
// Thread safety: run() from any thread; shutdown() from any thread.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace sb {

class PreparePool {
 public:
  explicit PreparePool(size_t threads);
  ~PreparePool();
  PreparePool(const PreparePool&) = delete;
  PreparePool& operator=(const PreparePool&) = delete;

  bool run(const std::function<void()>& job);
  void shutdown();

 private:
  struct Job;
  void work();

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job*> queue_;  // guarded by mu_
  bool stopping_ = false;   // guarded by mu_
  std::vector<std::thread> threads_;
};

}  // namespace sb
