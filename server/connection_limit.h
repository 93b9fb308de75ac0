// ConnectionLimit: cpp-httplib's task queue with a cap on connections.
// `threads` threads serve connections, at most one each; a connection that
// arrives while `threads` are open does not wait for one of them: it goes to
// a small overflow pool, where the server answers it at once (/health and
// /metrics as usual, anything else 503 with Retry-After) and closes it. So a
// flood of connections never queues in front of /health, and never holds
// more than `threads` connections open for long.
//
// Thread safety: enqueue() from httplib's listening thread; over_capacity()
// from the thread running a connection.
#pragma once

#include <httplib.h>

#include <atomic>
#include <cstddef>
#include <functional>
#include <memory>

namespace sb {

class ConnectionLimit : public httplib::TaskQueue {
 public:
  ConnectionLimit(size_t threads, size_t overflow_threads = 2);

  void enqueue(std::function<void()> fn) override;
  void shutdown() override;

  // On the thread serving a connection: whether it arrived over the cap.
  static bool over_capacity();

 private:
  const size_t threads_;
  std::atomic<size_t> open_{0};
  std::unique_ptr<httplib::ThreadPool> pool_, overflow_;
};

}  // namespace sb
