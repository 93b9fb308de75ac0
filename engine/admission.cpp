#include "engine/admission.h"

#include <pthread.h>
#include <algorithm>
#include <cmath>
#include <cstdio>

namespace sb {
namespace {

size_t tenant_limit(const AdmissionLimits& limits) {
  if (limits.tenant_share >= 1.0) return 0;
  const double slots = static_cast<double>(limits.slots) + static_cast<double>(limits.max_queue);
  return static_cast<size_t>(std::max(1.0, std::ceil(limits.tenant_share * slots)));
}

}  // namespace

Admission::Admission(AdmissionLimits limits, Start start)
    : limits_(limits), tenant_limit_(tenant_limit(limits)), start_(std::move(start)) {
  for (int i = 0; i < std::max(1, limits_.workers); ++i) workers_.emplace_back([this] {
      pthread_setname_np(pthread_self(), "sb-admit");
      work();
    });
}

Admission::~Admission() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = stopping_ = true;
    abandon_all();
  }
  work_cv_.notify_all();
  wait_idle();
  work_cv_.notify_all();
  for (auto& t : workers_) t.join();
}

Admit Admission::submit(CompletionRequest request, CompletionDone on_done, std::string tenant, bool bounded) {
  auto ticket = std::make_shared<Ticket>();
  Ticket* t = ticket.get();  // the ticket owns the request, so it outlives this callback
  auto asked = std::move(request.cancelled);
  ticket->request = std::move(request);
  ticket->request.cancelled = [t, asked = std::move(asked)] { return t->abandoned.load() || (asked && asked()); };
  ticket->tenant = std::move(tenant);
  ticket->on_done = std::move(on_done);
  ticket->submitted = std::chrono::steady_clock::now();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_) return Admit::kClosed;
    // A slot a worker is about to take counts as running (running_ is
    // raised only when it takes it), or a burst is refused below capacity.
    if (bounded && queue_.size() + running_ >= capacity()) return Admit::kFull;
    if (tenant_limit_ > 0 && !ticket->tenant.empty()) {
      auto it = held_.find(ticket->tenant);
      if (it != held_.end() && it->second >= tenant_limit_) return Admit::kTenantFull;
      ++held_[ticket->tenant];
    }
    queue_.push_back(std::move(ticket));
  }
  work_cv_.notify_one();
  return Admit::kOk;
}

void Admission::finish(Ticket& ticket, Status status, CompletionResult result) {
  try {
    if (ticket.on_done) ticket.on_done(std::move(status), std::move(result));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "statebank: a completion's on_done threw: %s\n", e.what());
  }
  release(ticket);
}

void Admission::release(const Ticket& ticket) {
  // Notified under the lock: once the counts say idle, drain() and the
  // destructor may return, and the condition variables go with this object.
  std::lock_guard<std::mutex> lock(mu_);
  --running_;
  if (tenant_limit_ > 0 && !ticket.tenant.empty()) {
    auto it = held_.find(ticket.tenant);
    if (it != held_.end() && --it->second == 0) held_.erase(it);
  }
  std::erase_if(started_, [&](const std::weak_ptr<Ticket>& w) {
    const auto s = w.lock();
    return s == nullptr || s.get() == &ticket;
  });
  work_cv_.notify_all();
  idle_cv_.notify_all();
}

void Admission::close() {
  std::lock_guard<std::mutex> lock(mu_);
  closed_ = true;
}

bool Admission::drain(std::chrono::milliseconds deadline) {
  std::unique_lock<std::mutex> lock(mu_);
  const bool idle = idle_cv_.wait_for(lock, deadline, [this] { return queue_.empty() && running_ == 0; });
  if (!idle) abandon_all();
  return idle;
}

size_t Admission::queued() const {
  std::lock_guard<std::mutex> lock(mu_);
  return queue_.size();
}

size_t Admission::running() const {
  std::lock_guard<std::mutex> lock(mu_);
  return running_;
}

size_t Admission::held() const {
  std::lock_guard<std::mutex> lock(mu_);
  return queue_.size() + running_;
}

bool Admission::closed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return closed_;
}

void Admission::wait_idle() {
  std::unique_lock<std::mutex> lock(mu_);
  idle_cv_.wait(lock, [this] { return queue_.empty() && running_ == 0; });
}

void Admission::abandon_all() {
  for (auto& t : queue_) t->abandoned = true;
  for (auto& w : started_)
    if (auto t = w.lock()) t->abandoned = true;
}

void Admission::work() {
  for (;;) {
    std::shared_ptr<Ticket> ticket;
    {
      std::unique_lock<std::mutex> lock(mu_);
      // While stopping every waiting request is taken, slot or not: it only ends.
      work_cv_.wait(lock,
                    [this] { return stopping_ || (!queue_.empty() && running_ < static_cast<size_t>(limits_.slots)); });
      if (queue_.empty()) return;  // stopping, and nothing left
      ticket = std::move(queue_.front());
      queue_.pop_front();
      ++running_;
      started_.push_back(ticket);
    }
    if (ticket->stop_requested()) {
      CompletionResult result;
      result.finish_reason = FinishReason::kCancelled;
      finish(*ticket, Status::ok(), std::move(result));  // as the step loop ends a cancelled request
      continue;
    }
    try {
      start_(ticket);
    } catch (const std::exception& e) {
      finish(*ticket, Status::internal(std::string("exception in the engine: ") + e.what()), CompletionResult{});
    }
  }
}

}  // namespace sb
