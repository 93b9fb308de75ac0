#include "server/connection_limit.h"

namespace sb {
namespace {

thread_local bool tl_over_capacity = false;

}  // namespace

ConnectionLimit::ConnectionLimit(size_t threads, size_t overflow_threads)
    : threads_(threads),
      pool_(std::make_unique<httplib::ThreadPool>(threads)),
      overflow_(std::make_unique<httplib::ThreadPool>(overflow_threads)) {}

void ConnectionLimit::enqueue(std::function<void()> fn) {
  // One connection per thread: within the cap a connection starts at once.
  if (open_.fetch_add(1) < threads_) {
    pool_->enqueue([this, fn = std::move(fn)] {
      fn();
      open_.fetch_sub(1);
    });
    return;
  }
  open_.fetch_sub(1);
  overflow_->enqueue([fn = std::move(fn)] {
    tl_over_capacity = true;
    fn();
    tl_over_capacity = false;
  });
}

void ConnectionLimit::shutdown() {
  pool_->shutdown();
  overflow_->shutdown();
}

bool ConnectionLimit::over_capacity() { return tl_over_capacity; }

}  // namespace sb
