#include "bank/remote/redis_pool.h"

namespace sb {

RedisCallStats& RedisCallStats::operator+=(const RedisCallStats& o) {
  trips += o.trips;
  timeouts += o.timeouts;
  failures += o.failures;
  skipped_calls += o.skipped_calls;
  probes += o.probes;
  round_trips += o.round_trips;
  in_flight += o.in_flight;
  wire_bytes_sent += o.wire_bytes_sent;
  wire_bytes_received += o.wire_bytes_received;
  return *this;
}

std::string redis_millis(std::chrono::milliseconds d) { return std::to_string(d.count()) + " ms"; }

RedisPool::RedisPool(Server server, bool up, OnTrip on_trip)
    : server_(std::move(server)),
      name_(RedisEndpoint{server_.host, server_.port}.text()),
      on_trip_(std::move(on_trip)),
      up_(up) {}

Status RedisPool::connect(RedisDeadline deadline, std::unique_ptr<RedisConnection>* out) const {
  return RedisConnection::open(server_.host, server_.port, server_.db, server_.password, deadline, out);
}

void RedisPool::adopt(std::unique_ptr<RedisConnection> conn) {
  std::lock_guard<std::mutex> l(mu_);
  idle_.push_back(std::move(conn));
  up_ = true;
}

Status RedisPool::probe(RedisDeadline deadline) {
  {
    std::lock_guard<std::mutex> l(mu_);
    ++stats_.probes;
  }
  std::unique_ptr<RedisConnection> conn;
  Status s = connect(deadline, &conn);  // connects, authenticates, PINGs
  if (s.is_ok()) adopt(std::move(conn));
  return s;
}

bool RedisPool::trip(const Status& why) {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (!up_.exchange(false)) return false;
    ++stats_.trips;
    idle_.clear();  // after a failure the others are suspect too
  }
  if (on_trip_) on_trip_(why);
  return true;
}

Status RedisPool::fail(const Status& why, bool timed_out) {
  {
    std::lock_guard<std::mutex> l(mu_);
    ++(timed_out ? stats_.timeouts : stats_.failures);
  }
  trip(why);
  return why;
}

Status RedisPool::call(std::span<const RedisCommand> commands, RedisDeadline deadline,
                       std::vector<RedisReplyPtr>* replies) {
  for (int attempt = 0;; ++attempt) {
    std::unique_ptr<RedisConnection> conn;
    {
      std::lock_guard<std::mutex> l(mu_);
      if (!up_) {
        ++stats_.skipped_calls;
        return Status::io_error("redis " + name_ + " is unavailable");
      }
      if (attempt == 0 && !idle_.empty()) {
        conn = std::move(idle_.back());
        idle_.pop_back();
      }
    }
    const bool reused = conn != nullptr;
    if (!conn) {
      Status s = connect(deadline, &conn);
      if (!s.is_ok()) return fail(s, RedisClock::now() >= deadline);
    }
    const uint64_t sent = conn->bytes_sent(), received = conn->bytes_received();
    {
      std::lock_guard<std::mutex> l(mu_);
      ++stats_.round_trips;
      ++stats_.in_flight;
    }
    Status s = conn->exchange(commands, deadline, replies);
    {
      std::lock_guard<std::mutex> l(mu_);
      --stats_.in_flight;
      stats_.wire_bytes_sent += conn->bytes_sent() - sent;
      stats_.wire_bytes_received += conn->bytes_received() - received;
      if (s.is_ok()) {
        if (up_ && idle_.size() < server_.max_idle) idle_.push_back(std::move(conn));
        return s;
      }
      // A pooled connection that the server closed while it sat idle (a
      // restart, an idle-client time-out) fails at once without a byte back;
      // the other idle ones are as old: drop them, and try once more.
      if (reused && attempt == 0 && !conn->timed_out() && conn->bytes_received() == received) {
        idle_.clear();
        continue;
      }
    }
    return fail(s, conn->timed_out());
  }
}

RedisCallStats RedisPool::stats() const {
  std::lock_guard<std::mutex> l(mu_);
  return stats_;
}

}  // namespace sb
