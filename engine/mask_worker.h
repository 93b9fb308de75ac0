// MaskWorker: one sequence's thread for the work of its logits processor that
// does not need the logits (LogitsProcessor::prepare(): a grammar's mask), so
// that it runs beside the forward pass and a slow mask holds back only its
// own sequence, never the step loop.
//
// One job at a time: post() only when idle(); the step loop draws the
// sequence's next token only once the job is done (take() gives its status).
// Thread safety: post(), idle(), take() and abandon() on the step thread;
// on_done runs on the worker's thread after each job.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

#include "common/status.h"

namespace sb {

class MaskWorker {
 public:
  explicit MaskWorker(std::function<void()> on_done);
  ~MaskWorker();  // waits for the running job (abandon() it first to end it sooner)
  MaskWorker(const MaskWorker&) = delete;
  MaskWorker& operator=(const MaskWorker&) = delete;

  void post(std::function<Status()> job);
  bool idle() const;
  // The last job's status (ok when none failed); REQUIRES idle().
  Status take();
  // The running job's interrupted() turns true: the sequence has ended.
  void abandon() { abandoned_ = true; }
  bool abandoned() const { return abandoned_.load(); }

 private:
  void run();

  std::function<void()> on_done_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::function<Status()> job_;  // guarded by mu_
  bool busy_ = false;            // guarded by mu_: posted and not done
  bool stopping_ = false;        // guarded by mu_
  Status status_;                // guarded by mu_
  std::atomic<bool> abandoned_{false};
  std::thread thread_;
};

}  // namespace sb
