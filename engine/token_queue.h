// TokenQueue: a request's output queue. The step loop pushes each generated
// token (CompletionRequest::on_token = TokenQueue::push) and goes on; the
// request's own thread takes them and turns them into text, stop strings and
// events. A stop decided there comes back as a cancellation: stop() makes
// push() return false, and the request's cancelled() should return stopped(),
// so the sequence leaves at its next step.
//
// The engine may run a few tokens past a stop before it sees it: the consumer
// knows how many it used and keeps only those (the tokens themselves never
// depend on when the stop arrived).
// Thread safety: every method may be called from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>

#include "engine/engine.h"

namespace sb {

class TokenQueue {
 public:
  // Producer: hands one token on; false once stop() was called.
  bool push(const GeneratedToken& token) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      tokens_.push_back(token);
    }
    cv_.notify_all();
    return !stopped();
  }
  // No token follows the ones pushed so far (the request has ended).
  void close() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      closed_ = true;
    }
    cv_.notify_all();
  }
  // Consumer: waits at most `wait` for tokens and moves them to *out.
  // Returns true when the queue is closed and *out holds the last of them.
  bool take(std::chrono::milliseconds wait, std::deque<GeneratedToken>* out) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, wait, [this] { return !tokens_.empty() || closed_; });
    out->clear();
    out->swap(tokens_);
    return closed_;
  }
  void stop() { stopped_ = true; }
  bool stopped() const { return stopped_.load(); }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<GeneratedToken> tokens_;  // guarded by mu_
  bool closed_ = false;                // guarded by mu_
  std::atomic<bool> stopped_{false};
};

}  // namespace sb
