// ThreadPool: a fixed set of workers that run parallel_for jobs.
//
// Kernels split work by output element ranges only, never by reduction
// ranges, so the number of threads changes speed and never bits.
// parallel_for may be called from several threads at once (each request's
// forward pass); the calling thread works on its own job too, so a call never
// waits on a queue that only it could drain. Workers run in the kernels'
// float mode (runtime/cpu/float_mode.h) for their whole life.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace sb {

class ThreadPool {
 public:
  explicit ThreadPool(int threads);  // threads >= 1; threads - 1 workers are started
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return threads_; }
  // Runs fn(i) for every i in [0, n) and returns when all have finished.
  void parallel_for(int64_t n, const std::function<void(int64_t)>& fn);
  // Runs fn(begin, end) over ranges that cover [0, n) once, each of
  // min_grain to max_grain items (the one that ends at n may be shorter;
  // REQUIRES: 1 <= min_grain <= max_grain, n / min_grain < 2^32). Each
  // thread takes ranges from the front of a contiguous share of its own, one
  // after another (one run of memory for the hardware's prefetchers), each
  // a part of what its share has left, so the ranges shrink towards its
  // end; a thread whose share is done takes ranges from the back of the
  // share with the most left, so the threads finish close together. Which
  // thread runs which range, and where ranges start, vary from call to call:
  // fn must give the same result for any split.
  void parallel_ranges(int64_t n, int64_t min_grain, int64_t max_grain,
                       const std::function<void(int64_t, int64_t)>& fn);

 private:
  struct Job;
  // How long an idle worker, or a caller waiting for the last index of its
  // job, spins before it blocks, counted in the spinning thread's own
  // iterations (calibrated once to this length): a budget of wall time is
  // used up while the machine runs another process on the thread's core, and
  // the thread then sleeps on its return, to cost a wake-up at the next job.
  static constexpr int kSpinMicros = 100;
  void worker_loop();
  Job* take_job();  // a queued job with indices left, marked as used; or null
  static void run_some(Job& job);

  int threads_;
  int64_t spin_iterations_;  // kSpinMicros of spinning
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job*> jobs_;            // guarded by mu_
  bool stop_ = false;                // guarded by mu_
  int sleepers_ = 0;                 // workers blocked on cv_; guarded by mu_
  std::atomic<uint64_t> epoch_{0};   // bumped on every push and on stop
  std::vector<std::thread> workers_;
};

}  // namespace sb
