#include "runtime/threads.h"

#include <chrono>

#include "runtime/cpu/float_mode.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace sb {
namespace {

void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#endif
}

// Spins until done() or `budget` passes; true if done.
template <typename Done>
bool spin_until(Done done, std::chrono::microseconds budget) {
  const auto until = std::chrono::steady_clock::now() + budget;
  for (int i = 0;; ++i) {
    if (done()) return true;
    cpu_relax();
    if ((i & 63) == 63 && std::chrono::steady_clock::now() > until) return done();
  }
}

}  // namespace

struct ThreadPool::Job {
  const std::function<void(int64_t)>* fn;
  int64_t n;
  std::atomic<int64_t> next{0};
  std::atomic<int64_t> done{0};
  std::atomic<int> users{0};  // workers inside run_some
  std::mutex mu;
  std::condition_variable cv;
  std::atomic<bool> caller_sleeps{false};
};

ThreadPool::ThreadPool(int threads) : threads_(threads < 1 ? 1 : threads) {
  for (int i = 1; i < threads_; ++i) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  epoch_.fetch_add(1);
  cv_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::run_some(Job& job) {
  for (;;) {
    int64_t i = job.next.fetch_add(1);
    if (i >= job.n) return;
    (*job.fn)(i);
    if (job.done.fetch_add(1) + 1 == job.n && job.caller_sleeps.load()) {
      std::lock_guard<std::mutex> lock(job.mu);
      job.cv.notify_all();
    }
  }
}

ThreadPool::Job* ThreadPool::take_job() {
  std::lock_guard<std::mutex> lock(mu_);
  while (!jobs_.empty()) {
    Job* job = jobs_.front();
    // A job stays queued until its last index is taken, so idle workers join it.
    if (job->next.load() >= job->n) {
      jobs_.pop_front();
      continue;
    }
    job->users.fetch_add(1);
    return job;
  }
  return nullptr;
}

void ThreadPool::worker_loop() {
  cpu::FlushSubnormals::set_for_this_thread();
  for (;;) {
    const uint64_t seen = epoch_.load();
    if (Job* job = take_job()) {
      run_some(*job);
      job->users.fetch_sub(1);
      continue;
    }
    // Between the kernels of one forward pass the gap is short: spin on the
    // epoch for a while (a wake-up through the kernel costs tens of
    // microseconds on a VM), then sleep until a job or stop arrives.
    if (spin_until([&] { return epoch_.load() != seen; }, std::chrono::microseconds(kSpinMicros))) continue;
    std::unique_lock<std::mutex> lock(mu_);
    ++sleepers_;
    cv_.wait(lock, [&] { return stop_ || !jobs_.empty(); });
    --sleepers_;
    if (stop_ && jobs_.empty()) return;
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
  bool wake;
  {
    std::lock_guard<std::mutex> lock(mu_);
    jobs_.push_back(&job);
    wake = sleepers_ > 0;
  }
  epoch_.fetch_add(1);
  if (wake) cv_.notify_all();
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
  auto finished = [&] { return job.done.load() == job.n && job.users.load() == 0; };
  if (spin_until(finished, std::chrono::microseconds(kSpinMicros))) return;
  std::unique_lock<std::mutex> lock(job.mu);
  job.caller_sleeps.store(true);
  while (!finished()) job.cv.wait_for(lock, std::chrono::microseconds(200));
}

}  // namespace sb
