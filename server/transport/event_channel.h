// EventChannel: the server-sent events of one streamed response, from the
// engine's step thread (tokens) and the scheduler's worker (the end) to the
// HTTP thread that writes them.
//
// Thread safety: every method may be called from any thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <string>
#include <vector>

namespace sb {

class EventChannel {
 public:
  void push(std::vector<std::string> events) {
    if (events.empty()) return;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (auto& e : events) events_.push_back(std::move(e));
    }
    cv_.notify_all();
  }
  // No event follows the ones pushed so far.
  void close() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      closed_ = true;
    }
    cv_.notify_all();
  }
  // Waits at most `wait` for events; returns what is there. *closed: the
  // channel is closed and nothing is left after these.
  std::deque<std::string> take(std::chrono::milliseconds wait, bool* closed) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, wait, [this] { return !events_.empty() || closed_; });
    std::deque<std::string> out;
    out.swap(events_);
    *closed = closed_;
    return out;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::string> events_;
  bool closed_ = false;
};

}  // namespace sb
