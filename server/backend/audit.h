// Auditor: `--audit RATE`, a sampled share of the restored requests
// recomputed with the bank bypassed and compared bit for bit; a mismatch
// quarantines every object the restore used (docs/bank.md, "Audit").
// Contract:
//  - it never delays a response: offer() (called once a response is
//    finished) copies and returns; jobs run on the auditor's own thread at
//    nice 19, only while `held()` shows no other request, and stop at the
//    next step when one arrives;
//  - it holds what it needs by ownership, never the caller's callbacks;
//  - a cold run cut short is counted as interrupted (or an error), never
//    compared, never quarantines;
//  - sampling is a counter (every 1/RATE-th eligible offer: restored at
//    least one block and generated a token), so a run is reproducible.
// Thread safety: offer(), stats() and drain() from any thread. The Engine
// and Bank must outlive the Auditor.
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
