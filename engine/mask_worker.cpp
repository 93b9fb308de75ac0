#include "engine/mask_worker.h"

#include "common/thread_priority.h"

namespace sb {

MaskWorker::MaskWorker(std::function<void()> on_done) : on_done_(std::move(on_done)) {
  // Lowered: a slow mask delays its own request's tokens, not the step thread.
  thread_ = background_thread("sb-mask", [this] { run(); });
}

MaskWorker::~MaskWorker() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void MaskWorker::post(std::function<Status()> job) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    job_ = std::move(job);
    busy_ = true;
  }
  cv_.notify_all();
}

bool MaskWorker::idle() const {
  std::lock_guard<std::mutex> lock(mu_);
  return !busy_;
}

Status MaskWorker::take() {
  std::lock_guard<std::mutex> lock(mu_);
  Status s = std::move(status_);
  status_ = Status::ok();
  return s;
}

void MaskWorker::run() {
  for (;;) {
    std::function<Status()> job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stopping_ || job_; });
      // Stopping waits for a posted job: its sequence's state must be whole.
      if (!job_) return;
      job = std::move(job_);
      job_ = nullptr;
    }
    Status s;
    try {
      s = job();
    } catch (const std::exception& e) {
      s = Status::internal(std::string("exception in the logits processor: ") + e.what());
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (status_ && !s) status_ = std::move(s);
      busy_ = false;
    }
    if (on_done_) on_done_();
  }
}

}  // namespace sb
