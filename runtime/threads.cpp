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
  // In units of min_grain items (the last one short where n ends). Each
  // index of the region owns a contiguous share of the units, its front and
  // back in one word, so that an owner's claim from the front and a thief's
  // from the back never take the same unit. One thread's ranges were runs
  // of memory apart when every claim took the next of one shared cursor:
  // each restarted the prefetchers, and a one-row product over 1-2 MB ran
  // 1.07-1.10x slower than with each thread on a fixed contiguous half, over
  // 256 KB 1.26x (docs/kernels.md, "Small steps").
  struct alignas(64) Share {
    std::atomic<uint64_t> span;  // front << 32 | back
  };
  auto pack = [](int64_t front, int64_t back) {
    return static_cast<uint64_t>(front) << 32 | static_cast<uint64_t>(back);
  };
  auto front_of = [](uint64_t span) { return static_cast<int64_t>(span >> 32); };
  auto back_of = [](uint64_t span) { return static_cast<int64_t>(span & 0xFFFFFFFFu); };
  const int64_t units = (n + min_grain - 1) / min_grain, most = max_grain / min_grain;
  std::vector<Share> shares(static_cast<size_t>(threads_));
  for (int t = 0; t < threads_; ++t)
    shares[static_cast<size_t>(t)].span.store(pack(units * t / threads_, units * (t + 1) / threads_));
  auto run = [&](int64_t u0, int64_t u1) { fn(u0 * min_grain, std::min(n, u1 * min_grain)); };
  // Takes `part` of the share's units left (at least one, at most `most`)
  // from its front or back; false once it has none left.
  auto claim = [&](Share& share, int64_t part, bool from_front) {
    uint64_t span = share.span.load();
    for (;;) {
      const int64_t front = front_of(span), back = back_of(span);
      if (front >= back) return false;
      const int64_t take = std::clamp((back - front) / part, int64_t{1}, most);
      const uint64_t next = from_front ? pack(front + take, back) : pack(front, back - take);
      if (!share.span.compare_exchange_weak(span, next)) continue;
      if (from_front)
        run(front, front + take);
      else
        run(back - take, back);
      return true;
    }
  };
  parallel_for(threads_, [&](int64_t own) {
    while (claim(shares[static_cast<size_t>(own)], 4, true)) {
    }
    // Then half of what the share with the most left has left, from its
    // back, so that its owner keeps its run (an index whose thread arrives
    // late, or never, is emptied this way by the others).
    for (;;) {
      Share* most_left = nullptr;
      int64_t left = 0;
      for (Share& share : shares) {
        const uint64_t span = share.span.load();
        const int64_t l = back_of(span) - front_of(span);
        if (l > left) left = l, most_left = &share;
      }
      if (!most_left) return;
      claim(*most_left, 2, false);  // emptied meanwhile: look again
    }
  });
}

}  // namespace sb
