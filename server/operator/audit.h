// Auditor: `--audit RATE`, the server checking its own promise. A sampled
// share of the requests that restored a prefix is recomputed with the bank
// bypassed and compared bit for bit (tokens, logprob bits, top
// alternatives). A mismatch takes every object the restore used out of every
// tier (Bank::quarantine), is logged once with the chain, and is counted;
// the next identical request is served cold and publishes correct objects.
//
// Never delaying a response, by construction:
//  1. offer() is called once the response is finished (built, and for a
//     stream, its last event written); it takes a mutex, copies the request
//     and result, and returns. Nothing else happens on the caller's thread.
//  2. Jobs run on the auditor's own thread, at the lowest CPU priority
//     (nice 19), and only start while `held()` says no request is running or
//     waiting. An audit still decoding when a request arrives stops at its
//     next step (counted as interrupted, not compared). A full queue drops
//     the newest offer (counted).
//  3. The audit holds what it needs by ownership: offer() copies the
//     request's data and drops the caller's callbacks (on_token, cancelled,
//     on_logits point into a response that is finished and may be freed);
//     the cold run gets the auditor's own.
//  4. The audit never destroys good state on weak evidence: a cold run that
//     ended before its own end (interrupted, cancelled, an error) is counted
//     as interrupted or as an error, never compared, never quarantines.
// Sampling is a counter, not a clock or a random draw: every 1/RATE-th
// eligible offer is audited, so a run is reproducible. Eligible: the bank
// restored at least one block and at least one token was generated,
// whatever ended generation (length, a stop token, a stop string).
//
// Thread safety: offer(), stats() and drain() may be called from any thread.
// The Engine and Bank must outlive the Auditor.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "bank/bank.h"
#include "engine/engine.h"

namespace sb {

struct AuditOptions {
  double rate = 0.0;       // in [0, 1]
  size_t max_queue = 16;   // offers waiting beyond this are dropped
  // The requests the engine's queue holds now, waiting or running, the
  // audit's own included (the server: Admission's one count). An audit
  // starts when it is 0 and stops when another request joins its own. Null:
  // none. Polled while jobs wait, and at every token of a running audit.
  std::function<size_t()> held;
  std::function<void(const std::string&)> log;  // null: stderr
  // Test hook: runs on the audit thread just before each job starts.
  std::function<void()> before_job;
};

struct AuditStats {
  uint64_t offered = 0;       // eligible offers
  uint64_t audits = 0;        // compared
  uint64_t mismatches = 0;
  uint64_t quarantined = 0;   // tier copies removed after mismatches
  uint64_t dropped = 0;       // the queue was full
  uint64_t interrupted = 0;   // the cold run was cut short (a request arrived, shutdown, cancelled): not compared
  uint64_t errors = 0;        // the cold run failed
};

class Auditor {
 public:
  Auditor(const Engine& engine, Bank* bank, AuditOptions options);
  ~Auditor();  // stops after the job that runs; queued jobs are dropped
  Auditor(const Auditor&) = delete;
  Auditor& operator=(const Auditor&) = delete;

  // Called after the response to `request` is finished.
  void offer(const CompletionRequest& request, const CompletionResult& served);
  AuditStats stats() const;
  // Waits until no job is queued or running (tests, shutdown).
  void drain();

 private:
  // No request but the audit's own `own` (0 or 1) in the engine's queue.
  bool others_idle(size_t own) const;
  struct Job {
    CompletionRequest request;
    CompletionResult served;
  };
  void run();
  void audit(const Job& job);
  void log(const std::string& line) const;

  const Engine& engine_;
  Bank* bank_;
  const AuditOptions options_;

  mutable std::mutex mu_;
  std::condition_variable cv_, idle_cv_;
  // Guarded by mu_.
  std::deque<Job> queue_;
  bool running_job_ = false;
  bool stop_ = false;
  std::atomic<bool> stopping_{false};  // the destructor runs
  double credit_ = 0;
  AuditStats stats_;

  std::thread thread_;
};

// Empty when `served` and `cold` agree bit for bit on the tokens `served`
// generated; else where they first differ.
std::string first_difference(const CompletionResult& served, const CompletionResult& cold);

}  // namespace sb
