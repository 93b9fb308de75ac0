// Admission: the one queue in front of a runner (the engine's restore stage
// and step loop; in the server's tests, a fake engine), the server's one gate
// with the one count of running and waiting requests (docs/batching.md,
// "Admit"). Contract:
//  - submit() never blocks: beyond `slots` running and `max_queue` waiting
//    it is kFull (bounded submissions only), after close() kClosed; with a
//    tenant limit (tenant_share < 1) one tenant holds at most
//    ceil(tenant_share x (slots + max_queue)) requests, else kTenantFull;
//  - every accepted request ends by exactly one on_done, and only then
//    leaves the count (held() = queued() + running());
//  - one cancelled (or abandoned by drain's deadline or the destructor)
//    before a worker takes it never reaches the runner: it ends ok, kCancelled;
//  - at most `slots` run; `workers` threads start them in arrival order;
//  - drain() is true when nothing is held, else abandons what is left.
// Thread safety: every method may be called from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
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

// One accepted request, from submit() to its on_done.
struct Ticket {
  CompletionRequest request;  // its cancelled() also says when the ticket is abandoned
  std::string tenant;         // empty: none
  CompletionDone on_done;
  std::chrono::steady_clock::time_point submitted;
  std::atomic<bool> abandoned{false};  // drain's deadline or shutdown: stop at the next step

  bool stop_requested() const { return request.cancelled && request.cancelled(); }
};

struct AdmissionLimits {
  int slots = 8;          // running at once (the engine's max_running)
  size_t max_queue = 64;  // waiting beyond the slots
  double tenant_share = 1.0;
  int workers = 1;  // threads that take requests and start them
};

class Admission {
 public:
  // Starts a request whose slot is taken, on a worker thread. It must lead
  // to exactly one finish() of the ticket, on any thread, now or later.
  using Start = std::function<void(const std::shared_ptr<Ticket>&)>;

  Admission(AdmissionLimits limits, Start start);
  // Refuses new requests, abandons every waiting and running one, waits
  // until each has ended (the runner must still finish what it started),
  // then joins the workers.
  ~Admission();
  Admission(const Admission&) = delete;
  Admission& operator=(const Admission&) = delete;

  // `bounded` false: never kFull (a caller that waits for its result, such
  // as Engine::complete(), waits in the queue instead).
  Admit submit(CompletionRequest request, CompletionDone on_done, std::string tenant, bool bounded = true);
  // Ends a started request: on_done, then its slot is free.
  void finish(Ticket& ticket, Status status, CompletionResult result);
  void close();  // refuse new requests from now on
  bool drain(std::chrono::milliseconds deadline);

  size_t queued() const;
  size_t running() const;
  // queued() + running() under one lock: the one count of the requests the
  // queue holds (the audit waits for it to be 0).
  size_t held() const;
  bool closed() const;  // close() was called: the server is draining
  // Waits, without a deadline, until nothing waits or runs (every on_done
  // has returned); abandons nothing.
  void wait_idle();
  // The most requests held at once: slots + max_queue.
  size_t capacity() const { return static_cast<size_t>(limits_.slots) + limits_.max_queue; }

 private:
  void work();
  void abandon_all();  // under mu_
  void release(const Ticket& ticket);

  const AdmissionLimits limits_;
  const size_t tenant_limit_;  // 0: none
  const Start start_;
  mutable std::mutex mu_;
  std::condition_variable work_cv_;  // a request waits and a slot is free, or stopping
  std::condition_variable idle_cv_;  // a request ended
  std::deque<std::shared_ptr<Ticket>> queue_;
  std::vector<std::weak_ptr<Ticket>> started_;  // running, for abandon_all (pruned as they end)
  std::map<std::string, size_t> held_;          // by tenant: waiting or running
  size_t running_ = 0;
  bool closed_ = false;
  bool stopping_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace sb
