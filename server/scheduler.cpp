#include "server/scheduler.h"

#include "server/backend.h"

namespace sb {

Scheduler::Scheduler(Backend* backend, int workers, size_t max_queue) : backend_(backend), max_queue_(max_queue) {
  for (int i = 0; i < std::max(1, workers); ++i) workers_.emplace_back([this] { work(); });
}

Scheduler::~Scheduler() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = true;
    stopping_ = true;
    for (auto& job : queue_) job->cancelled = true;
  }
  cv_.notify_all();
  for (auto& t : workers_) t.join();
}

Scheduler::Submit Scheduler::submit(std::shared_ptr<Job> job) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_) return Submit::kClosed;
    // A worker that is idle but not yet awake will take a queued job: count
    // it as running, or a burst of arrivals is refused below capacity.
    if (queue_.size() + running_.load() >= workers_.size() + max_queue_) return Submit::kFull;
    if (tenant_limit_ > 0 && !job->tenant.empty()) {
      size_t& held = held_[job->tenant];
      if (held >= tenant_limit_) return Submit::kTenantFull;
      ++held;
    }
    queue_.push_back(std::move(job));
  }
  cv_.notify_one();
  return Submit::kOk;
}

void Scheduler::close() {
  std::lock_guard<std::mutex> lock(mu_);
  closed_ = true;
}

bool Scheduler::drain(std::chrono::milliseconds deadline) {
  std::unique_lock<std::mutex> lock(mu_);
  bool idle = idle_cv_.wait_for(lock, deadline, [this] { return queue_.empty() && running_.load() == 0; });
  if (!idle) {
    for (auto& job : queue_) job->cancelled = true;
  }
  return idle;
}

size_t Scheduler::queued() const {
  std::lock_guard<std::mutex> lock(mu_);
  return queue_.size();
}

void Scheduler::work() {
  for (;;) {
    std::shared_ptr<Job> job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping and nothing left
      job = std::move(queue_.front());
      queue_.pop_front();
      ++running_;
    }
    Status status;
    CompletionResult result;
    if (job->should_stop()) {
      status = Status::cancelled(job->cancelled ? "cancelled before it started" : "past its deadline before it started");
      result.finish_reason = FinishReason::kCancelled;
    } else {
      try {
        status = backend_->complete(job->request, &result);
      } catch (const std::exception& e) {
        status = Status::internal(std::string("exception in the engine: ") + e.what());
      }
    }
    {
      std::lock_guard<std::mutex> lock(job->mu);
      job->status = status;
      job->result = std::move(result);
      if (job->on_done) job->on_done(*job);
      job->done = true;
    }
    job->cv.notify_all();
    {
      std::lock_guard<std::mutex> lock(mu_);
      --running_;
      if (tenant_limit_ > 0 && !job->tenant.empty()) {
        auto it = held_.find(job->tenant);
        if (it != held_.end() && --it->second == 0) held_.erase(it);
      }
    }
    idle_cv_.notify_all();
  }
}

}  // namespace sb
