// Scheduler: a bounded queue of completion jobs in front of the engine.
// `workers` threads (the engine's max_running) each hand one job to the
// backend and wait for it, so the engine batches up to that many at once.
//
// Promises:
//  1. submit() never blocks: a full queue is kFull (the route answers 429), a
//     closed scheduler is kClosed (503). Full means max_queue jobs wait
//     beyond one for each worker, whether the workers have taken theirs yet
//     or not.
//  2. Every submitted job ends exactly once: its `done` flag is set and its
//     waiters are woken, whether it ran, failed or was cancelled before it
//     started.
//  3. A job that is cancelled (its flag, or its deadline passed) before a
//     worker takes it never reaches the engine; one cancelled while it runs
//     stops at the engine's next step (request.cancelled() says so).
//  4. With a tenant limit (set_tenant_limit), one tenant holds at most that
//     many jobs, queued and running together: one more of its own is
//     kTenantFull (429) while other tenants still get in. Jobs without a
//     tenant (no keys) are not limited by it.
//  5. drain() returns when the queue is empty and no worker runs, or at the
//     deadline (then it cancels what is left and returns false).
// Thread safety: every method may be called from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/status.h"
#include "engine/engine.h"

namespace sb {

class Backend;

struct Job {
  using Clock = std::chrono::steady_clock;

  CompletionRequest request;  // request.on_token and .cancelled are set by the submitter
  std::string tenant;         // the key's tenant; empty without keys
  std::atomic<bool> cancelled{false};  // the client is gone
  Clock::time_point deadline = Clock::time_point::max();

  bool past_deadline() const { return Clock::now() >= deadline; }
  bool should_stop() const { return cancelled.load() || past_deadline(); }

  // Guarded by mu: the outcome.
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  Status status;
  CompletionResult result;
  // Runs on the worker, under mu, after complete() returned and before done is set.
  std::function<void(Job&)> on_done;
};

class Scheduler {
 public:
  enum class Submit { kOk, kFull, kTenantFull, kClosed };

  Scheduler(Backend* backend, int workers, size_t max_queue);
  ~Scheduler();

  Submit submit(std::shared_ptr<Job> job);
  // At most `jobs` queued and running per tenant; 0: no limit. Before the first submit.
  void set_tenant_limit(size_t jobs) { tenant_limit_ = jobs; }
  void close();  // refuse new jobs from now on
  bool drain(std::chrono::milliseconds deadline);

  size_t queued() const;
  size_t running() const { return running_.load(); }

 private:
  void work();

  Backend* backend_;
  size_t max_queue_;
  mutable std::mutex mu_;
  std::condition_variable cv_;     // a job was queued, or stopping
  std::condition_variable idle_cv_;
  std::deque<std::shared_ptr<Job>> queue_;
  size_t tenant_limit_ = 0;
  std::map<std::string, size_t> held_;  // by tenant: jobs queued or running (guarded by mu_)
  bool closed_ = false;
  bool stopping_ = false;
  std::atomic<size_t> running_{0};
  std::vector<std::thread> workers_;
};

}  // namespace sb
