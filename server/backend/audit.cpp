#include "server/backend/audit.h"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>

namespace sb {
namespace {

bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }

// What the audit may keep of a finished request: its data, and only the
// callbacks that own what they use. The caller's on_token, cancelled and
// on_logits point into its response (a job that is freed, or cancelled,
// once that response is done); make_processor owns its grammar (a shared
// pointer) and makes a fresh processor per run.
CompletionRequest owned_copy(const CompletionRequest& request) {
  CompletionRequest copy = request;
  copy.on_token = nullptr;
  copy.cancelled = nullptr;
  copy.on_logits = nullptr;
  return copy;
}

}  // namespace

std::string first_difference(const CompletionResult& served, const CompletionResult& cold) {
  if (cold.tokens.size() != served.tokens.size())
    return "the cold run generated " + std::to_string(cold.tokens.size()) + " tokens, the served one " +
           std::to_string(served.tokens.size());
  for (size_t i = 0; i < served.tokens.size(); ++i) {
    const auto &a = served.tokens[i], &b = cold.tokens[i];
    bool same = a.token == b.token && same_bits(a.logprob, b.logprob) && a.top.size() == b.top.size();
    for (size_t k = 0; same && k < a.top.size(); ++k)
      same = a.top[k].token == b.top[k].token && same_bits(a.top[k].logprob, b.top[k].logprob);
    if (!same) return "generated token " + std::to_string(i) + " differs";
  }
  return "";
}

Auditor::Auditor(const Engine& engine, Bank* bank, AuditOptions options)
    : engine_(engine), bank_(bank), options_(std::move(options)) {
  if (options_.rate > 0) thread_ = std::thread([this] { run(); });
}

Auditor::~Auditor() {
  stopping_ = true;  // a running cold run stops at its next step
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
    queue_.clear();
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Auditor::log(const std::string& line) const {
  if (options_.log)
    options_.log(line);
  else
    std::fprintf(stderr, "statebank serve: %s\n", line.c_str());
}

void Auditor::offer(const CompletionRequest& request, const CompletionResult& served) {
  if (options_.rate <= 0 || bank_ == nullptr || request.cache_mode == CacheMode::kBypass ||
      served.restore.restore_point <= 0 || served.tokens.empty())
    return;
  {
    std::lock_guard<std::mutex> l(mu_);
    if (stop_) return;
    ++stats_.offered;
    credit_ += options_.rate;
    if (credit_ < 1.0) return;
    credit_ -= 1.0;
    if (queue_.size() >= options_.max_queue) {
      ++stats_.dropped;
      return;
    }
    queue_.push_back(Job{owned_copy(request), served});
  }
  cv_.notify_all();
}

AuditStats Auditor::stats() const {
  std::lock_guard<std::mutex> l(mu_);
  return stats_;
}

void Auditor::drain() {
  std::unique_lock<std::mutex> l(mu_);
  idle_cv_.wait(l, [&] { return stop_ || (queue_.empty() && !running_job_); });
}

bool Auditor::others_idle(size_t own) const { return !options_.held || options_.held() <= own; }

void Auditor::run() {
  // The lowest priority for this thread (Linux: per thread).
  (void)setpriority(PRIO_PROCESS, static_cast<id_t>(::syscall(SYS_gettid)), 19);
  for (;;) {
    Job job;
    {
      std::unique_lock<std::mutex> l(mu_);
      for (;;) {
        if (stop_) return;
        if (!queue_.empty() && others_idle(0)) break;
        // Waits for an offer; while jobs wait for idle time, looks again
        // every 20 ms (the server does not announce that it went idle).
        if (queue_.empty())
          cv_.wait(l);
        else
          cv_.wait_for(l, std::chrono::milliseconds(20));
      }
      job = std::move(queue_.front());
      queue_.pop_front();
      running_job_ = true;
    }
    if (options_.before_job) options_.before_job();
    audit(job);
    {
      std::lock_guard<std::mutex> l(mu_);
      running_job_ = false;
    }
    idle_cv_.notify_all();
  }
}

void Auditor::audit(const Job& job) {
  const CompletionResult& served = job.served;
  CompletionRequest cold = job.request;  // owns every callback it has (owned_copy)
  cold.cache_mode = CacheMode::kBypass;
  cold.max_tokens = static_cast<int64_t>(served.tokens.size());
  // The audit's own reasons to stop: the server got busy, or the auditor is
  // being destroyed.
  std::atomic<bool> interrupted{false};
  cold.cancelled = [this, &interrupted] {
    if (stopping_.load() || !others_idle(1)) interrupted = true;
    return interrupted.load();
  };
  cold.on_token = [&](const GeneratedToken&) {
    if (stopping_.load() || !others_idle(1)) interrupted = true;
    return !interrupted.load();
  };
  CompletionResult again;
  const Status s = engine_.complete(cold, &again);
  // A cold run that ended before its own end (cancelled, for whatever
  // reason) proves nothing: never a mismatch, never a quarantine.
  const bool cut = interrupted.load() || s.code() == Code::kCancelled || again.finish_reason == FinishReason::kCancelled;
  {
    std::lock_guard<std::mutex> l(mu_);
    if (cut) {
      ++stats_.interrupted;
      return;
    }
    ++(s.is_ok() ? stats_.audits : stats_.errors);
  }
  if (!s.is_ok()) {
    log("audit: the cold recomputation failed: " + s.to_string());
    return;
  }
  const std::string why = first_difference(served, again);
  if (why.empty()) return;
  const uint64_t removed =
      bank_->quarantine(served.restored_objects, "audit mismatch: " + why + " after a restore of this object");
  const auto& chain = served.restored_chain;
  log("AUDIT MISMATCH: a request restored at " + std::to_string(served.restore.restore_point) + " tokens (" +
      served.restore.mode.name() + ") differs from its cold recomputation: " + why + "; chain " +
      (chain.empty() ? std::string("?") : chain.front().hex()) + " .. " +
      (chain.empty() ? std::string("?") : chain.back().hex()) + " (" + std::to_string(served.restored_objects.size()) +
      " objects); quarantined " + std::to_string(removed) + " copies");
  std::lock_guard<std::mutex> l(mu_);
  ++stats_.mismatches;
  stats_.quarantined += removed;
}

}  // namespace sb
