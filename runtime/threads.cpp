#include "runtime/threads.h"

#include <atomic>

#include "runtime/cpu/float_mode.h"

namespace sb {

struct ThreadPool::Job {
  const std::function<void(int64_t)>* fn;
  int64_t n;
  std::atomic<int64_t> next{0};
  std::atomic<int64_t> done{0};
  int users = 0;  // workers inside run_some; guarded by mu
  std::mutex mu;
  std::condition_variable cv;
};

ThreadPool::ThreadPool(int threads) : threads_(threads < 1 ? 1 : threads) {
  for (int i = 1; i < threads_; ++i) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::run_some(Job& job) {
  for (;;) {
    int64_t i = job.next.fetch_add(1);
    if (i >= job.n) return;
    (*job.fn)(i);
    if (job.done.fetch_add(1) + 1 == job.n) {
      std::lock_guard<std::mutex> lock(job.mu);
      job.cv.notify_all();
    }
  }
}

void ThreadPool::worker_loop() {
  cpu::FlushSubnormals::set_for_this_thread();
  for (;;) {
    Job* job = nullptr;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || !jobs_.empty(); });
      if (stop_ && jobs_.empty()) return;
      job = jobs_.front();
      // A job stays queued until its last index is taken, so idle workers join it.
      if (job->next.load() >= job->n) {
        jobs_.pop_front();
        continue;
      }
      std::lock_guard<std::mutex> job_lock(job->mu);
      ++job->users;
    }
    run_some(*job);
    std::lock_guard<std::mutex> job_lock(job->mu);
    --job->users;
    job->cv.notify_all();
  }
}

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t)>& fn) {
  if (n <= 0) return;
  if (n == 1 || workers_.empty()) {
    for (int64_t i = 0; i < n; ++i) fn(i);
    return;
  }
  Job job;
  job.fn = &fn;
  job.n = n;
  {
    std::lock_guard<std::mutex> lock(mu_);
    jobs_.push_back(&job);
  }
  cv_.notify_all();
  run_some(job);
  {
    // Once unqueued, no worker can start using the job; then wait for those
    // that did, so none holds a pointer to it after we return.
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = jobs_.begin(); it != jobs_.end(); ++it)
      if (*it == &job) {
        jobs_.erase(it);
        break;
      }
  }
  std::unique_lock<std::mutex> lock(job.mu);
  job.cv.wait(lock, [&] { return job.done.load() == job.n && job.users == 0; });
}

}  // namespace sb
