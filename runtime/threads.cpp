#include "runtime/threads.h"

#include <algorithm>
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

// How many cpu_relax() iterations take `micros` of a running thread: the
// fastest of a few timed batches (a batch the machine interrupted is slower).
int64_t iterations_for(int micros) {
  constexpr int kBatch = 4096;
  double best = 1e9;
  for (int rep = 0; rep < 5; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < kBatch; ++i) cpu_relax();
    best = std::min(best, std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
  }
  return std::max<int64_t>(kBatch, static_cast<int64_t>(micros * kBatch / std::max(best, 1e-3)));
}

// Spins until done() or `iterations` spins have passed; true if done.
template <typename Done>
bool spin_until(Done done, int64_t iterations) {
  for (int64_t i = 0; i < iterations; ++i) {
    if (done()) return true;
    cpu_relax();
  }
  return done();
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
  static const int64_t spins = iterations_for(kSpinMicros);
  spin_iterations_ = spins;
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
    if (spin_until([&] { return epoch_.load() != seen; }, spin_iterations_)) continue;
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
  if (spin_until(finished, spin_iterations_)) return;
  std::unique_lock<std::mutex> lock(job.mu);
  job.caller_sleeps.store(true);
  while (!finished()) job.cv.wait_for(lock, std::chrono::microseconds(200));
}

void ThreadPool::parallel_ranges(int64_t n, int64_t min_grain, int64_t max_grain,
                                 const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  // One index per thread, each claiming ranges until none are left; a worker
  // that arrives late (or never) leaves its index to whoever is free, whose
  // claim then finds the ranges gone.
  std::atomic<int64_t> next{0};
  const int64_t share = 2 * static_cast<int64_t>(threads_);
  parallel_for(threads_, [&](int64_t) {
    int64_t begin = next.load();
    for (;;) {
      if (begin >= n) return;
      const int64_t take = std::min(n - begin, std::clamp((n - begin) / share, min_grain, max_grain));
      if (!next.compare_exchange_weak(begin, begin + take)) continue;
      fn(begin, begin + take);
      begin = next.load();
    }
  });
}

}  // namespace sb
