// RedisPool: the connections to one Redis server (a single server, or one
// node of a cluster) and the one way a pipeline goes over them, behind a
// circuit breaker. RedisTier keeps one; RedisCluster one per node.
// Contract:
//  - call() takes an idle connection or opens one, all within its deadline;
//    a pooled connection the server closed while it sat idle (no byte back,
//    no time-out) is dropped with its siblings and the call made once more
//    on a fresh one, under the same deadline;
//  - a failed call trips the breaker: idle connections are dropped and
//    every call fails at once, sending nothing, until probe() connects; the
//    owner's on_trip runs once per trip, outside the pool's lock;
//  - the counters are exactly the exchanges this pool ran.
// Thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "bank/remote/redis_connection.h"

namespace sb {

// What a pool (or a set of pools) counted; the first fields of the tier's
// and the cluster's statistics.
struct RedisCallStats {
  uint64_t trips = 0;          // times a breaker opened
  uint64_t timeouts = 0;       // calls that ran out of time
  uint64_t failures = 0;       // calls that failed otherwise (refused, reset, server error)
  uint64_t skipped_calls = 0;  // calls answered at once while a breaker was open (nothing sent)
  uint64_t probes = 0;         // connection attempts while a breaker was open
  uint64_t round_trips = 0;    // exchanges started
  uint64_t in_flight = 0;      // exchanges running now
  uint64_t wire_bytes_sent = 0, wire_bytes_received = 0;  // RESP bytes on the sockets
  RedisCallStats& operator+=(const RedisCallStats& o);
};

// "500 ms", for the remote tier's log lines.
std::string redis_millis(std::chrono::milliseconds d);

class RedisPool {
 public:
  struct Server {
    std::string host;  // numeric (resolve_redis_host)
    int port = 6379;
    int db = 0;
    std::string password;  // empty: no AUTH
    size_t max_idle = 8;
  };
  using OnTrip = std::function<void(const Status& why)>;
  // `up`: whether the breaker starts closed.
  RedisPool(Server server, bool up, OnTrip on_trip);
  RedisPool(const RedisPool&) = delete;
  RedisPool& operator=(const RedisPool&) = delete;

  // One exchange (see the contract). Not OK: the breaker was open (nothing
  // sent), or the exchange failed and opened it.
  Status call(std::span<const RedisCommand> commands, RedisDeadline deadline, std::vector<RedisReplyPtr>* replies);
  // A new connection (connected, authenticated, database selected), outside the pool.
  Status connect(RedisDeadline deadline, std::unique_ptr<RedisConnection>* out) const;
  // Keeps `conn` idle and closes the breaker.
  void adopt(std::unique_ptr<RedisConnection> conn);
  // Counts a probe and connects; on success adopts the connection.
  Status probe(RedisDeadline deadline);
  // Opens the breaker (an error reply that says the server is not serving);
  // true when this call opened it, on_trip having run.
  bool trip(const Status& why);
  bool up() const { return up_.load(); }
  RedisCallStats stats() const;
  const std::string& name() const { return name_; }  // host:port, for logs

 private:
  // Counts the failure and trips; returns `why`.
  Status fail(const Status& why, bool timed_out);

  const Server server_;
  const std::string name_;
  const OnTrip on_trip_;
  std::atomic<bool> up_;
  mutable std::mutex mu_;
  // Guarded by mu_.
  std::vector<std::unique_ptr<RedisConnection>> idle_;
  RedisCallStats stats_;
};

}  // namespace sb
