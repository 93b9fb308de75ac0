#include "server/transport/prepare_pool.h"

#include <exception>

#include "common/thread_priority.h"

namespace sb {

struct PreparePool::Job {
  const std::function<void()>* fn = nullptr;
  std::exception_ptr error;
  bool done = false;  // guarded by the pool's mu_
  bool ran = false;
};

PreparePool::PreparePool(size_t threads) {
  for (size_t i = 0; i < threads; ++i) threads_.push_back(background_thread("sb-prepare", [this] { work(); }));
}

PreparePool::~PreparePool() {
  shutdown();
  for (auto& t : threads_) t.join();
}

bool PreparePool::run(const std::function<void()>& fn) {
  if (threads_.empty()) {
    fn();
    return true;
  }
  Job job;
  job.fn = &fn;
  std::unique_lock<std::mutex> lock(mu_);
  if (stopping_) return false;
  queue_.push_back(&job);
  cv_.notify_all();
  cv_.wait(lock, [&] { return job.done; });
  if (job.error) std::rethrow_exception(job.error);
  return job.ran;
}

void PreparePool::shutdown() {
  std::lock_guard<std::mutex> lock(mu_);
  stopping_ = true;
  // Jobs not started are answered now: their requests are refused.
  for (Job* job : queue_) job->done = true;
  queue_.clear();
  cv_.notify_all();
}

void PreparePool::work() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;
    Job* job = queue_.front();
    queue_.pop_front();
    lock.unlock();
    try {
      (*job->fn)();
    } catch (...) {
      job->error = std::current_exception();
    }
    lock.lock();
    job->ran = true;
    job->done = true;
    cv_.notify_all();
  }
}

}  // namespace sb
